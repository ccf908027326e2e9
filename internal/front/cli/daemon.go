package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/app/nightly"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
)

func init() {
	register(command{
		Name:    "daemon",
		Summary: "join the machines working the job queue: queued requests and the nightly pass, one job at a time",
		Run:     daemonRun,
	})
}

func daemonRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "daemon", "[flags]")
	machine := fs.String("machine", "", "this machine's name in the queue and on its samples (default: machine.name, else the host name)")
	class := fs.String("class", "", "the machine class whose jobs this daemon takes, e.g. bench-2core (default: machine.class, else default)")
	leaseTTL := fs.Duration("lease-ttl", 0, "a running job's lease; a dead machine's job moves within about 4/3 of it (default: machine.lease_ttl, else 2m)")
	schedule := fs.String("schedule", "", "cron spec overriding nightly.schedule, e.g. \"@every 6h\" or \"CRON_TZ=Europe/Berlin 0 2 * * *\"")
	noNightly := fs.Bool("no-nightly", false, "take queued requests only; schedule no nightly pass")
	noPost := fs.Bool("no-post", false, "record findings but post nothing (post jobs are left to other daemons)")
	serveAddr := fs.String("serve", "", "also serve the web dashboard on `HOST:PORT` (e.g. 127.0.0.1:8080; see 'pgbisect serve')")
	flags := addStoreFlags(fs)
	if err := parseNoArgs(fs, env, ""); err != nil {
		return err
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
	st, err := a.Store(ctx)
	if err != nil {
		return err
	}
	// A daemon killed with kill -9 leaves its servers running: the one
	// restarted in its state directory stops them before anything else.
	if err := a.SweepStrays(ctx); err != nil {
		return err
	}
	jc := jobs.Config{
		Store:          st,
		Machine:        firstOf(*machine, cfg.Machine.Name),
		Class:          firstOf(*class, cfg.Machine.Class),
		LeaseTTL:       cfg.Machine.LeaseTTL,
		NightlyClasses: cfg.Machine.NightlyClasses,
		NightlyRequest: app.NightlyRequest{Wait: true},
		NoPosts:        *noPost,
		Log:            env.Log,
		Sink: func(key string) (app.Sink, func()) {
			log, closeLog := daemonJobLog(cfg.StateDir, "job-"+key)
			return daemonSink(log), closeLog
		},
		Ops: a,
	}
	if *leaseTTL > 0 {
		jc.LeaseTTL = *leaseTTL
	}
	if !*noNightly {
		jc.Nightly = sched
	}
	if jc.Machine != "" && jobs.MachineName(jc.Machine) != jc.Machine {
		return usageError("machine name %q: use lowercase letters and digits separated by '-' or '_', e.g. %s", jc.Machine, jobs.MachineName(jc.Machine))
	}
	queue, err := jobs.NewQueue(st)
	if err != nil {
		return err
	}
	d, err := jobs.New(jc)
	if err != nil {
		return err
	}
	// Jobs an older pgbisect queued in its own queue move into River once.
	if n, err := queue.MoveLegacyJobs(ctx, d.Class()); err != nil {
		return err
	} else if n > 0 {
		env.Log.Info("moved the jobs of the old queue into River", slog.Int("jobs", n))
	}
	nightlyNote := fmt.Sprintf("schedule %q (%s)", spec, cfg.Nightly.TimeZone)
	if *noNightly {
		nightlyNote = "no nightly pass"
	}
	if cfg.GitHub.Poll > 0 {
		disp, err := newDispatcher(cfg, st, queue, d.Class(), env.Log)
		if err != nil {
			return err
		}
		if disp == nil {
			return usageError("github.poll is set but github.repo or GITHUB_TOKEN is not: reading commands from comments needs both")
		}
		go pollComments(ctx, disp, cfg.GitHub.Poll, true, env.Log)
	}
	if *serveAddr != "" {
		hook, err := webhook(ctx, cfg, st, queue, d.Class(), env, cfg.GitHub.Poll == 0)
		if err != nil {
			return err
		}
		serve, err := dashboard(ctx, env, cfg, st, queue, *serveAddr, "", d.Class(), hook)
		if err != nil {
			return err
		}
		go func() {
			if err := serve(); err != nil {
				env.Log.Error("the dashboard stopped", slog.String("err", err.Error()))
			}
		}()
	}
	fmt.Fprintf(env.Stderr, "pgbisect daemon: machine %s, class %s, state %s, %s, jobs in %s; stop with SIGTERM, SIGHUP or Ctrl-C\n",
		d.Machine(), d.Class(), cfg.StateDir, nightlyNote, a.StoreName())
	return d.Run(ctx)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// jobRequest reads a queued job's request.
func jobRequest(j jobs.Job) (app.Request, error) {
	var args struct {
		Request json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(j.Args, &args); err != nil {
		return nil, fmt.Errorf("job %d: %w", j.ID, err)
	}
	r, _, err := app.DecodeRequest(j.Kind, args.Request)
	if err != nil {
		return nil, fmt.Errorf("job %d: %w", j.ID, err)
	}
	return r, nil
}

// daemonSink passes each event's line to the job's log, and a queued
// bisection's result as 'pgbisect bisect' prints it.
func daemonSink(log func(string)) app.Sink {
	return func(e app.Event) {
		if e.Kind == app.KindBisected && e.Bisected != nil {
			var buf bytes.Buffer
			bisectPrintResult(&buf, e.Bisected)
			for line := range strings.Lines(buf.String()) {
				if line = strings.TrimSpace(line); line != "" {
					log(line)
				}
			}
			return
		}
		if line := eventLine(e); line != "" {
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
