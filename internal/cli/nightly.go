package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/config"
	"github.com/pgbisect/pgbisect/internal/nightly"
	"github.com/pgbisect/pgbisect/internal/proc"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/outbox"
)

func init() {
	register(command{
		Name:    "nightly",
		Summary: "one nightly pass: fetch, build the branch head, compare it with the last night, bisect what got slower",
		Run:     nightlyRun,
	})
}

func nightlyRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "nightly", "[--force] [--wait] [flags]")
	force := fs.Bool("force", false, "measure the head even if it has not moved since the last pass")
	wait := fs.Bool("wait", false, "wait while another pgbisect job uses the machine (default: refuse)")
	noPost := fs.Bool("no-post", false, "record findings but post nothing (they wait for 'pgbisect post --pending')")
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
	unlock, err := nightlyLockMachine(ctx, env, cfg.StateDir, *wait)
	if err != nil {
		return err
	}
	defer unlock()
	d, err := nightlyOpen(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer d.close()
	p, err := d.pass(ctx, *force, func(s string) { fmt.Fprintln(env.Stderr, s) })
	if err != nil {
		return err
	}
	res, err := p.Run(ctx)
	if res != nil {
		nightlyPrint(env.Stdout, res)
	}
	if !*noPost {
		d.deliver(ctx)
	}
	return err
}

// nightlyLockMachine takes the machine lock, saying who holds it when it
// is busy: with wait it waits for them, without it refuses.
func nightlyLockMachine(ctx context.Context, env *Env, stateDir string, wait bool) (func(), error) {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	unlock, err := nightly.LockMachine(ctx, stateDir, false)
	var busy *nightly.BusyError
	if errors.As(err, &busy) && wait {
		fmt.Fprintf(env.Stderr, "waiting for the machine: %s is using it\n", busy.Holder)
		return nightly.LockMachine(ctx, stateDir, true)
	}
	return unlock, err
}

// nightlyDeps are the parts a nightly pass and the daemon's jobs run on.
type nightlyDeps struct {
	cfg        *config.Config
	env        *Env
	store      *store.Store
	closeStore func()
	repo       *build.Repo
	builder    *build.Builder
	runner     *bench.Runner
	scenarios  []*bench.Scenario
	mu         sync.Mutex // serialises bisectExecute's use of env
}

// nightlyOpen checks the suite and opens the results store. The repository
// is opened by the first pass: a daemon must start (and take requests) even
// when the repository cannot be reached at boot.
func nightlyOpen(ctx context.Context, env *Env, cfg *config.Config) (*nightlyDeps, error) {
	d := &nightlyDeps{cfg: cfg, env: env}
	for _, s := range cfg.Nightly.Scenarios {
		path, err := filepath.Abs(cfg.ScenarioPath(s))
		if err != nil {
			return nil, err
		}
		sc, err := bench.LoadFile(path)
		if err != nil {
			return nil, fmt.Errorf("nightly suite: %w", err)
		}
		d.scenarios = append(d.scenarios, sc)
	}
	if len(d.scenarios) == 0 {
		return nil, errors.New("the nightly suite is empty: list scenario files under nightly.scenarios in the config")
	}
	st, done, err := openResults(ctx, env, cfg)
	if err != nil {
		return nil, err
	}
	d.store, d.closeStore = st, done
	d.runner = &bench.Runner{StateDir: cfg.StateDir, ClientBin: cfg.Bench.ClientBin, Log: env.Log, KeepClusters: cfg.Bench.KeepClusters}
	if proc.IsRoot() {
		if d.runner.RunAs, err = proc.LookupUser(cfg.RunAs); err != nil {
			done()
			return nil, err
		}
	}
	return d, nil
}

func (d *nightlyDeps) close() {
	_ = d.runner.Close(context.Background())
	d.closeStore()
}

// pass returns a nightly pass over the configured branch and suite,
// opening (or cloning) the repository the first time.
func (d *nightlyDeps) pass(ctx context.Context, force bool, progress func(string)) (*nightly.Pass, error) {
	if d.builder == nil {
		var err error
		if d.builder, d.repo, err = openBuilder(ctx, d.env, d.cfg); err != nil {
			return nil, err
		}
		recordBuilds(d.builder, d.store, d.env.Log)
	}
	var clientBin func(string)
	if d.cfg.Bench.ClientBin == "" {
		clientBin = func(dir string) { d.runner.ClientBin = dir }
	}
	return &nightly.Pass{
		ClientBin:    clientBin,
		Branch:       d.cfg.Branch,
		Scenarios:    d.scenarios,
		Thresholds:   nightlyThresholds(d.cfg.Stats),
		Force:        force,
		BuildOptions: d.builder.Options().String(),
		Repo:         d.repo,
		Builder:      d.builder,
		Sampler:      d.runner,
		Store:        d.store,
		Bisect: func(ctx context.Context, req nightly.BisectRequest) (*notify.Finding, error) {
			return d.bisect(ctx, req, progress)
		},
		Report: func(ctx context.Context, f *notify.Finding) error {
			dir, err := notify.Publish(ctx, notify.ReportsDir(d.cfg.StateDir), f, outbox.New(d.store))
			if err == nil {
				progress(fmt.Sprintf("finding %s: %s", notify.Title(f), filepath.Join(dir, notify.ReportMarkdown)))
			}
			return err
		},
		Log:      d.env.Log,
		Progress: progress,
	}, nil
}

// nightlyThresholds are the base of the night-to-night comparisons:
// bench/stats' defaults with the config's stats section over them. The pass
// layers each scenario's and metric's over them (bench.Scenario.Thresholds).
func nightlyThresholds(s config.Stats) stats.Thresholds {
	return s.Apply(stats.DefaultThresholds).WithDefaults()
}

// bisect runs a bisection as 'pgbisect bisect' does (same state files, so
// an interrupted one resumes), with the bisection's own thresholds layered
// as that command layers them, except the smallest effect, which is the
// night-to-night comparison's (given as --min-effect would be).
func (d *nightlyDeps) bisect(ctx context.Context, req nightly.BisectRequest, progress func(string)) (*notify.Finding, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cfg := *d.cfg
	env := &Env{Stdout: io.Discard, Stderr: nightlyLineWriter(nil, progress), Log: d.env.Log, results: d.store}
	out, err := bisectExecute(ctx, env, &cfg, bisectRequest{
		CallerReports: true,
		Scenario:      req.Scenario.File, Good: req.Good.Hash, Bad: req.Bad.Hash, Metric: req.Metric, Point: req.Point,
		MinEffect: req.Thresholds.MinEffect,
		ClientBin: d.cfg.Bench.ClientBin, Keep: d.cfg.Bench.KeepClusters, ProfileRuns: bisectProfileRuns,
	})
	if err != nil {
		return nil, err
	}
	return out.Finding, nil
}

// deliver posts pending findings when posting is configured.
func (d *nightlyDeps) deliver(ctx context.Context) {
	if d.cfg.GitHub.Repo == "" || os.Getenv("GITHUB_TOKEN") == "" {
		return
	}
	p, err := notify.NewPoster(d.cfg.GitHub.Options())
	if err != nil {
		fmt.Fprintf(d.env.Stderr, "not posting: %v\n", err)
		return
	}
	p.Log = d.env.Log
	box, err := outboxOf(ctx, d.env, d.store, d.cfg.StateDir)
	if err != nil {
		fmt.Fprintf(d.env.Stderr, "not posting: %v\n", err)
		return
	}
	where := storeName(d.cfg.DB)
	unlock, err := box.Lock(ctx)
	if err != nil {
		fmt.Fprintf(d.env.Stderr, "not posting: %v\n", err)
		return
	}
	defer unlock()
	del, err := p.Deliver(ctx, box)
	for _, pst := range del.Posts {
		fmt.Fprintf(d.env.Stderr, "posted: %s\n", postLine(pst))
	}
	for _, e := range del.Failed {
		fmt.Fprintf(d.env.Stderr, "not posted (waits in %s for 'pgbisect post --pending'): %v\n", where, e)
	}
	if err != nil {
		fmt.Fprintf(d.env.Stderr, "posting: %v\n", err)
	}
}

// nightlyPrint prints what a pass did.
func nightlyPrint(w io.Writer, res *nightly.Result) {
	r := res.Run
	fmt.Fprintf(w, "nightly %s at %s: %s\n", r.Branch, build.Short(r.Commit), r.Status)
	if res.Detail.Base != "" {
		fmt.Fprintf(w, "compared with %s\n", build.Short(res.Detail.Base))
	}
	for _, m := range res.Detail.Results {
		point := m.Point
		if point != "" {
			point = " " + point
		}
		fmt.Fprintf(w, "  %s%s: %s %+.1f%%, %s: %s (p=%.3g, n=%d)\n", m.Scenario, point, m.Metric, 100*m.Change, nightlyBetter(m.Direction), m.Verdict, m.P, m.N)
	}
	for _, c := range res.Detail.ChangePoints {
		fmt.Fprintf(w, "  change point %s %s at %s (%+.1f%% over the series): re-measured %s..%s: %s %+.1f%%, %s: %s\n",
			c.Scenario, c.Metric, build.Short(c.At), 100*c.RelChange, build.Short(c.Before), build.Short(c.Until), c.Metric, 100*c.Change, nightlyBetter(c.Direction), c.Verdict)
	}
	for _, f := range res.Findings {
		fmt.Fprintf(w, "finding %s: %s\n", f.ID, notify.Title(f))
	}
	if res.Detail.Error != "" {
		fmt.Fprintf(w, "error: %s\n", res.Detail.Error)
	}
}

// nightlyBetter says which way a metric is better.
func nightlyBetter(d notify.Direction) string {
	if d == notify.HigherIsBetter {
		return "higher is better"
	}
	return "lower is better"
}

// nightlyLineWriter copies to w and hands each complete line to fn.
func nightlyLineWriter(w io.Writer, fn func(string)) io.Writer {
	return &lineWriter{w: w, fn: fn}
}

type lineWriter struct {
	w   io.Writer
	fn  func(string)
	buf []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	if l.w != nil {
		if _, err := l.w.Write(p); err != nil {
			return 0, err
		}
	}
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(l.buf[:i])); line != "" && l.fn != nil {
			l.fn(line)
		}
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}
