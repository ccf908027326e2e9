package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/nightly"
	"github.com/pgbisect/pgbisect/store"
)

func init() {
	register(command{
		Name:    "daemon",
		Summary: "run the nightly pass on the configured schedule and queued requests, one job at a time",
		Run:     daemonRun,
	})
}

func daemonRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "daemon", "[flags]")
	poll := fs.Duration("poll", 30*time.Second, "how often an idle daemon looks for queued requests")
	schedule := fs.String("schedule", "", "cron spec overriding nightly.schedule, e.g. \"@every 6h\" or \"CRON_TZ=Europe/Berlin 0 2 * * *\"")
	noNightly := fs.Bool("no-nightly", false, "take queued requests only; run no nightly pass")
	noPost := fs.Bool("no-post", false, "record findings but post nothing")
	flags := addStoreFlags(fs)
	pos, err := parseFlags(fs, env)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("unexpected argument %q", pos[0])
	}
	a, cfg, err := flags.open(ctx, env)
	if err != nil {
		return err
	}
	defer a.Close()
	spec := cfg.Nightly.Schedule
	if *schedule != "" {
		spec = *schedule
	}
	sched, err := nightly.ParseSchedule(spec, cfg.Nightly.TimeZone)
	if err != nil {
		return err
	}
	// Refuse to start on a broken suite rather than fail at night.
	if _, err := a.NightlySuite(); err != nil {
		return err
	}
	queue, err := a.Store(ctx)
	if err != nil {
		return err
	}
	dm := &nightly.Daemon{
		StateDir: cfg.StateDir,
		Queue:    queue,
		Kinds:    []string{"bisect"},
		RunJob: func(ctx context.Context, job store.Job, progress func(string)) error {
			return daemonRunJob(ctx, a, job, progress)
		},
		Poll: *poll,
		Log:  env.Log,
	}
	if !*noNightly {
		dm.Schedule = sched
		dm.Nightly = func(ctx context.Context, progress func(string)) error {
			log, closeLog := daemonJobLog(cfg.StateDir, "nightly-"+time.Now().UTC().Format("20060102T150405Z"))
			defer closeLog()
			res, err := a.Nightly(ctx, app.NightlyRequest{Wait: true, Deliver: !*noPost}, daemonSink(progress, log))
			if err != nil {
				log(err.Error())
			}
			if res != nil {
				env.Log.Info("nightly result", "commit", res.Run.Commit, "status", res.Run.Status, "findings", len(res.Findings))
			}
			return err
		}
	}
	if err := dm.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "pgbisect daemon: state %s, schedule %q (%s), queue in %s; stop with SIGTERM, SIGHUP or Ctrl-C\n",
		cfg.StateDir, spec, cfg.Nightly.TimeZone, a.StoreName())
	return dm.Wait()
}

// daemonRunJob runs a queued request by calling the application; a
// bisection resumes from its saved state, so a job the last daemon left
// running continues where it stopped. Its events are recorded under the
// job (app.JobID), its lines go to the job's log and status.
func daemonRunJob(ctx context.Context, a *app.App, job store.Job, progress func(string)) error {
	r, err := jobRequest(job)
	if err != nil {
		return err
	}
	req, ok := r.(app.BisectRequest)
	if !ok {
		return fmt.Errorf("job %d: this daemon runs only bisect jobs, not %s", job.ID, r.Kind())
	}
	log, closeLog := daemonJobLog(a.Options().StateDir, fmt.Sprintf("job-%d", job.ID))
	defer closeLog()
	log(fmt.Sprintf("pgbisect bisect %s (attempt %d)", strings.Join(req.Args(), " "), job.Attempts))
	out, err := a.Bisect(ctx, app.JobID(job.ID), req, daemonSink(progress, log))
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := bisectPrint(&buf, out, false); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		if line = strings.TrimSpace(line); line != "" {
			progress(line)
			log(line)
		}
	}
	return nil
}

// jobRequest reads a queued job's request. A job an older pgbisect queued
// as the command line of 'pgbisect bisect' is parsed with that command's
// flags, so it runs exactly as it would have.
func jobRequest(job store.Job) (app.Request, error) {
	r, legacy, err := app.DecodeRequest(job.Kind, job.Args)
	if errors.Is(err, app.ErrLegacyJob) {
		return legacyBisectRequest(legacy)
	}
	if err != nil {
		return nil, fmt.Errorf("job %d: %w", job.ID, err)
	}
	return r, nil
}

// legacyBisectRequest parses the arguments of 'pgbisect bisect' an older
// 'pgbisect request' queued. Their --config, --state, --repo and --db were
// the daemon's, and still are.
func legacyBisectRequest(l *app.LegacyJob) (app.BisectRequest, error) {
	var msgs bytes.Buffer
	env := &Env{Args: l.Argv, Stderr: &msgs}
	fs := newFlags(env, "bisect", "")
	request := bisectFlags(fs)
	fs.Bool("json", false, "")
	addStoreFlags(fs)
	pos, err := parseFlags(fs, env)
	if err == nil && len(pos) > 0 {
		err = fmt.Errorf("unexpected argument %q", pos[0])
	}
	if err != nil {
		return app.BisectRequest{}, fmt.Errorf("a bisect job queued by an older pgbisect as %q: %v; queue it again with 'pgbisect request bisect'", l.Argv, err)
	}
	req := request()
	req.Requester = l.Requester
	return req, nil
}

// daemonSink passes each event's line to the daemon's progress and the
// job's log.
func daemonSink(progress, log func(string)) app.Sink {
	return func(e app.Event) {
		if line := eventLine(e); line != "" {
			progress(line)
			log(line)
		}
	}
}

// daemonJobLog appends lines to stateDir/logs/jobs/NAME.log.
func daemonJobLog(stateDir, name string) (log func(string), closeLog func()) {
	dir := filepath.Join(stateDir, "logs", "jobs")
	_ = os.MkdirAll(dir, 0o755)
	f, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return func(string) {}, func() {}
	}
	return func(s string) { fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), s) }, func() { f.Close() }
}
