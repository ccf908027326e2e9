package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

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
	cfg, err := flags.load()
	if err != nil {
		return err
	}
	spec := cfg.Nightly.Schedule
	if *schedule != "" {
		spec = *schedule
	}
	sched, err := nightly.ParseSchedule(spec, cfg.Nightly.TimeZone)
	if err != nil {
		return err
	}
	d, err := nightlyOpen(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer d.close()
	dm := &nightly.Daemon{
		StateDir: cfg.StateDir,
		Queue:    d.store,
		Kinds:    []string{"bisect"},
		RunJob:   d.runJob,
		Poll:     *poll,
		Log:      env.Log,
	}
	if !*noNightly {
		dm.Schedule = sched
		dm.Nightly = func(ctx context.Context, progress func(string)) error {
			log, closeLog := daemonJobLog(cfg.StateDir, "nightly-"+time.Now().UTC().Format("20060102T150405Z"))
			defer closeLog()
			p, err := d.pass(ctx, false, func(s string) { progress(s); log(s) })
			if err != nil {
				log(err.Error())
				return err
			}
			res, err := p.Run(ctx)
			if !*noPost {
				d.deliver(ctx)
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
		cfg.StateDir, spec, cfg.Nightly.TimeZone, storeName(cfg.DB))
	return dm.Wait()
}

// daemonBisectArgs is what 'pgbisect request bisect' queues.
type daemonBisectArgs struct {
	// Argv are the arguments of 'pgbisect bisect', scenario paths made
	// absolute; the daemon adds its own --config, --state and --repo.
	Argv []string `json:"argv"`
	// Requester is who queued it (user@host), for status.
	Requester string `json:"requester,omitempty"`
}

// runJob runs a queued request as the command it names would run
// in-process; a bisection resumes from its saved state, so a job the last
// daemon left running continues where it stopped.
func (d *nightlyDeps) runJob(ctx context.Context, job store.Job, progress func(string)) error {
	if job.Kind != "bisect" {
		return fmt.Errorf("unknown job kind %q: this pgbisect runs only bisect jobs", job.Kind)
	}
	var args daemonBisectArgs
	if err := json.Unmarshal(job.Args, &args); err != nil {
		return fmt.Errorf("job %d: bad arguments: %w", job.ID, err)
	}
	argv := append([]string{}, args.Argv...)
	if d.cfg.File != "" {
		argv = append(argv, "--config", d.cfg.File)
	}
	argv = append(argv, "--state", d.cfg.StateDir, "--repo", d.cfg.Repo)
	log, closeLog := daemonJobLog(d.cfg.StateDir, fmt.Sprintf("job-%d", job.ID))
	defer closeLog()
	log(fmt.Sprintf("pgbisect bisect %q (attempt %d)", argv, job.Attempts))
	w := nightlyLineWriter(nil, func(s string) { progress(s); log(s) })
	return commands["bisect"].Run(ctx, &Env{Args: argv, Stdout: w, Stderr: w, Log: d.env.Log, results: d.store})
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
