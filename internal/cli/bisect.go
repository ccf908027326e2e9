package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/config"
	"github.com/pgbisect/pgbisect/internal/proc"
	"github.com/pgbisect/pgbisect/internal/strictyaml"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/bisections"
	"github.com/pgbisect/pgbisect/store/outbox"
)

func init() {
	register(command{
		Name:    "bisect",
		Summary: "find the commit(s) between a good and a bad revision that made a scenario slower",
		Run:     bisectRun,
	})
}

// bisectRequest is one bisection as the user asked for it.
type bisectRequest struct {
	Scenario    string            // scenario file
	Set         map[string]string // scenario variable overrides
	Good, Bad   string            // revisions
	Metric      string            // "" = the scenario's first metric
	Point       string            // "" = the only point
	FirstParent bool
	// ReuseSamples lets search comparisons reuse every earlier sample of
	// a commit (bisect.State.Window 0) instead of only fresh ones.
	ReuseSamples bool
	// Alpha, MinEffect and MaxSamples are the flags (0: not given); they
	// override the scenario's stats section, which overrides the config's.
	Alpha, MinEffect float64
	MaxSamples       int
	// Thresholds, when set (a resumed bisection), are used as they are.
	Thresholds stats.Thresholds
	Resume     string // a bisection ID to resume instead
	ClientBin  string // "" = the good commit's build
	Keep       bool   // keep clusters
	Post       bool   // post the finding to GitHub
	// CallerReports leaves recording the finding in the outbox to the
	// caller (a nightly pass adds its series first). Otherwise the finding
	// is recorded, and pending for 'pgbisect post --pending' only when
	// Post is set.
	CallerReports bool
	// ProfileRuns is the profiled runs each side of a confirmed culprit
	// gets for "where the time went" (bisectprofile.go); 0: none.
	ProfileRuns int
	// ProfileFramePointers profiles builds with frame pointers instead
	// of the bisection's own.
	ProfileFramePointers bool
}

// bisectOutcome is what a finished bisection leaves behind.
type bisectOutcome struct {
	State     *bisect.State
	Finding   *notify.Finding
	ReportDir string
}

func bisectRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "bisect", "-s SCENARIO --good REV --bad REV [flags]\n       pgbisect bisect --resume ID")
	var req bisectRequest
	fs.StringVar(&req.Scenario, "s", "", "scenario file (required unless --resume)")
	fs.StringVar(&req.Scenario, "scenario", "", "scenario file (same as -s)")
	fs.StringVar(&req.Good, "good", "", "a revision without the regression")
	fs.StringVar(&req.Bad, "bad", "", "a later revision with it (good must be its ancestor)")
	fs.StringVar(&req.Metric, "metric", "", "metric to bisect on (default: the scenario's first)")
	fs.StringVar(&req.Point, "point", "", "matrix point to bisect at, e.g. `clients=1` (needed when the scenario has several)")
	fs.BoolVar(&req.FirstParent, "first-parent", false, "follow only first parents (merges count as one commit)")
	fs.BoolVar(&req.ReuseSamples, "reuse-samples", false, "let each comparison reuse every earlier sample of a commit: about half the samples, but only\nsafe on a dedicated, quiet machine (the speed of a shared one drifts over hours)")
	minEffect := fs.Float64("min-effect", 0, "smallest change worth a culprit, as a fraction (default 0.05)")
	maxSamples := fs.Int("max-samples", 0, "sample budget per side of one comparison (default 60; checks get twice as many)")
	alpha := fs.Float64("alpha", 0, "false-positive rate of one search comparison (default 0.05; blames are bounded at 1% separately)")
	fs.StringVar(&req.Resume, "resume", "", "resume the bisection `ID` (re-running the same command resumes it too)")
	asJSON := fs.Bool("json", false, "print the finding as JSON on stdout")
	fs.BoolVar(&req.Post, "post", false, "post the finding to the GitHub repository of the config")
	sets := runSetFlag{}
	fs.Var(sets, "set", "set a scenario variable: `var=value` (repeatable)")
	flags := addStoreFlags(fs)
	fs.StringVar(&req.ClientBin, "client-bin", "", "directory of the pgbench and psql used for every run (default: bench.client_bin, else the good commit's build)")
	fs.BoolVar(&req.Keep, "keep-clusters", false, "keep cluster directories for debugging")
	fs.IntVar(&req.ProfileRuns, "profile-runs", bisectProfileRuns, "CPU-profile each confirmed culprit and its parent with perf this many runs each (0: no profiles)")
	fs.BoolVar(&req.ProfileFramePointers, "profile-frame-pointers", false, "profile builds made with -fno-omit-frame-pointer (a separate build; the first is a full one) for exact inclusive shares")
	pos, err := parseFlags(fs, env)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("unexpected argument %q: give revisions with --good and --bad", pos[0])
	}
	if req.Resume == "" && (req.Scenario == "" || req.Good == "" || req.Bad == "") {
		return usageError("give -s SCENARIO, --good REV and --bad REV (or --resume ID)")
	}
	if req.ProfileRuns < 0 {
		return usageError("--profile-runs %d: give a number of runs, or 0 for no profiles", req.ProfileRuns)
	}
	if *minEffect < 0 || *minEffect >= 1 {
		return usageError("--min-effect %g is out of range: it is a fraction, 0.05 means 5%%", *minEffect)
	}
	cfg, err := flags.load()
	if err != nil {
		return err
	}
	if len(sets) > 0 {
		req.Set = sets
	}
	req.Alpha, req.MinEffect, req.MaxSamples = *alpha, *minEffect, *maxSamples
	req.ClientBin = runFirstNonEmpty(req.ClientBin, cfg.Bench.ClientBin)
	req.Keep = req.Keep || cfg.Bench.KeepClusters

	out, err := bisectExecute(ctx, env, cfg, req)
	if err != nil {
		return err
	}
	if *asJSON {
		data, err := notify.Marshal(out.Finding)
		if err != nil {
			return err
		}
		_, err = env.Stdout.Write(append(data, '\n'))
		return err
	}
	bisectPrintResult(env.Stdout, out)
	return nil
}

// bisectExecute checks the request, then starts or resumes the bisection,
// runs it to the end and writes its reports. demo uses it too.
func bisectExecute(ctx context.Context, env *Env, cfg *config.Config, req bisectRequest) (*bisectOutcome, error) {
	// Benchmarks must not overlap: wait for a nightly pass, a daemon job or
	// another run on this machine (a nested call from the daemon shares the
	// hold of its job).
	unlock, err := nightlyLockMachine(ctx, env, cfg.StateDir, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// The state lives in the results store, opened once the inputs are
	// known to be good (a resumed bisection's inputs are in the store).
	var saver *bisections.DB
	release := func() {}
	defer func() { release() }()
	openSaver := func() error {
		if saver != nil {
			return nil
		}
		results, done, err := openResults(ctx, env, cfg)
		if err != nil {
			return err
		}
		release = done
		saver = &bisections.DB{Store: results, Files: &bisect.FileSaver{Dir: cfg.StateDir}}
		return nil
	}
	var st *bisect.State
	if req.Resume != "" {
		if err := openSaver(); err != nil {
			return nil, err
		}
		if st, err = saver.Load(ctx, req.Resume); err != nil {
			return nil, err
		}
		in := st.Inputs
		req.Scenario, req.Set, req.Good, req.Bad = in.Scenario, in.Set, in.Good, in.Bad
		req.Metric, req.Point, req.FirstParent, req.Thresholds = in.Metric, in.Point, in.FirstParent, in.Thresholds
		cfg.Repo = in.Repo
	}
	if !build.IsURL(cfg.Repo) {
		if abs, err := filepath.Abs(cfg.Repo); err == nil {
			cfg.Repo = abs
		}
	}
	if abs, err := filepath.Abs(req.Scenario); err == nil {
		req.Scenario = abs
	}

	// Check everything that can be checked before building anything.
	sc, err := bench.LoadFileWith(req.Scenario, req.Set)
	if err != nil {
		return nil, err
	}
	metric, err := bisectMetric(sc, req.Metric)
	if err != nil {
		return nil, err
	}
	point, err := bisectPoint(sc, req.Point)
	if err != nil {
		return nil, err
	}
	if req.Thresholds == (stats.Thresholds{}) {
		req.Thresholds = sc.Thresholds(cfg.Stats.Apply(bisect.DefaultThresholds), &metric,
			&config.Stats{Alpha: req.Alpha, MinEffect: req.MinEffect, MaxSamples: req.MaxSamples})
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	builder, repo, err := openBuilder(ctx, env, cfg)
	if err != nil {
		return nil, err
	}
	good, bad, givenGood, err := bisectResolve(ctx, env, cfg, repo, req.Good, req.Bad)
	if err != nil {
		return nil, err
	}
	if err := openSaver(); err != nil {
		return nil, err
	}
	results := saver.Store
	recordBuilds(builder, results, env.Log)
	in := bisect.Inputs{
		Repo: cfg.Repo, Good: good.Hash, Bad: bad.Hash, Scenario: req.Scenario, Set: req.Set,
		Metric: metric.Name, Unit: metric.Unit, Direction: metric.Direction, Point: point.String(),
		FirstParent: req.FirstParent, Thresholds: req.Thresholds, GivenGood: givenGood,
	}
	if st == nil {
		st, err = saver.Load(ctx, bisect.ID(in))
		switch {
		case err == nil:
			fmt.Fprintf(env.Stderr, "resuming bisection %s: %d builds and %d samples already taken\n", st.ID, st.BuildsDone, st.SamplesTaken)
		case errors.Is(err, bisect.ErrNotFound):
			if st, err = bisectNewState(ctx, env, repo, builder, in, good); err != nil {
				return nil, err
			}
			if req.ReuseSamples {
				st.Window = 0
			}
			// Saved at once, so the ID printed below resumes even if the
			// first build or sample fails.
			if err := saver.Save(ctx, st); err != nil {
				return nil, err
			}
			fmt.Fprintf(env.Stderr, "bisection %s: %d commits, %d can be culprits (resume with: pgbisect bisect --resume %s)\n",
				st.ID, len(st.Commits), st.CandidateCount(), st.ID)
		default:
			return nil, err
		}
	}

	// Measure.
	bb := &bisectBuilder{b: builder}
	runner := &bench.Runner{StateDir: cfg.StateDir, ClientBin: req.ClientBin, Log: slog.New(&onceHandler{Handler: env.Log.Handler()}), KeepClusters: req.Keep}
	if proc.IsRoot() {
		if runner.RunAs, err = proc.LookupUser(cfg.RunAs); err != nil {
			return nil, err
		}
	}
	defer runner.Close(context.WithoutCancel(ctx))
	m := &bisectMeasurer{runner: runner, sc: sc, point: point, metric: metric.Name, results: results, id: st.ID}
	if !st.Done() && runner.ClientBin == "" {
		// One pgbench and psql for every run: the good commit's.
		start := time.Now()
		if t, err := bb.Build(ctx, good.Hash); err == nil {
			runner.ClientBin = t.(bisectTarget).BinDir
		}
		st.BuildTime += time.Since(start) // the engine finds it in the cache
	}
	// Progress: a status line before each build and sample, and each
	// decision (verdict, split, skip, check) as it is made.
	shown := len(st.Events)
	events := func() {
		for _, e := range st.Events[shown:] {
			if e.Kind != "build" {
				fmt.Fprintf(env.Stderr, "==> %s\n", e.Message)
			}
		}
		shown = len(st.Events)
	}
	eng := &bisect.Engine{Builder: bb, Measurer: m, Saver: saver, Progress: func(s bisect.Status) {
		events()
		fmt.Fprintln(env.Stderr, s)
	}}
	err = eng.Run(ctx, st)
	events()
	if err != nil {
		return nil, fmt.Errorf("%w (everything measured is saved: resume with 'pgbisect bisect --resume %s')", err, st.ID)
	}

	// Report.
	f := st.Finding(bisect.Report{
		Branch: cfg.Branch, Env: m.environment(ctx), Settings: bisectSettings(sc, point), Reproduce: bisectReproduce(req, st),
		Build: notify.BuildInfo{System: bisectSystem(builder.Options()), Configure: builder.Options().Configure,
			CFLAGS: builder.Options().CFLAGS, MesonOptions: builder.Options().MesonOptions, ClientBin: runner.ClientBin},
	})
	bisectProfileJob{Stderr: env.Stderr, StateDir: cfg.StateDir, ID: st.ID, Runs: req.ProfileRuns, Runner: runner, Builder: bb, Options: builder.Options(), FramePointers: bisectFramePointers(req.ProfileFramePointers, env, repo, cfg.StateDir, builder), Scenario: sc, Point: point}.profileCulprits(ctx, f)
	var box *outbox.DB
	var adder notify.Adder
	if !req.CallerReports {
		if box, err = outboxOf(ctx, env, results, cfg.StateDir); err != nil {
			return nil, err
		}
		adder = box
	}
	dir, err := notify.Publish(ctx, notify.ReportsDir(cfg.StateDir), f, adder)
	if err != nil {
		return nil, err
	}
	out := &bisectOutcome{State: st, Finding: f, ReportDir: dir}
	switch {
	case box == nil:
	case req.Post:
		if err := bisectPost(ctx, env, cfg, box, f.ID); err != nil {
			fmt.Fprintf(env.Stderr, "pgbisect bisect: not posted: %v; the finding waits in %s: run 'pgbisect post --pending' to retry\n", err, storeName(cfg.DB))
		}
	default:
		// Kept, but not queued for posting: nobody asked for it.
		if err := results.SettleFinding(ctx, f.ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// bisectMetric finds the metric to bisect on.
func bisectMetric(sc *bench.Scenario, name string) (bench.Metric, error) {
	specs := sc.MetricSpecs()
	if len(specs) == 0 {
		return bench.Metric{}, fmt.Errorf("scenario %s defines no metrics", sc.File)
	}
	if name == "" {
		return specs[0], nil
	}
	var names []string
	for _, m := range specs {
		if m.Name == name {
			return m, nil
		}
		names = append(names, m.Name)
	}
	hint := ""
	if c := strictyaml.Closest(name, names); c != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", c)
	}
	return bench.Metric{}, usageError("scenario %s has no metric %q%s; it has: %s", sc.Name, name, hint, strings.Join(names, ", "))
}

// bisectPoint finds the matrix point to bisect at.
func bisectPoint(sc *bench.Scenario, p string) (bench.Point, error) {
	if p != "" {
		pt, err := sc.FindPoint(p)
		if err != nil {
			return bench.Point{}, usageError("%v", err)
		}
		return pt, nil
	}
	points := sc.Points()
	if len(points) == 1 {
		return points[0], nil
	}
	var names []string
	for _, pt := range points {
		names = append(names, pt.String())
	}
	return bench.Point{}, usageError("scenario %s has %d matrix points: choose one with --point (%s)", sc.Name, len(points), strings.Join(names, ", "))
}

// bisectResolve resolves both revisions and checks that good is an
// ancestor of bad. When they are on diverging branches (REL_15_0 and
// REL_16_0), it bisects from their merge base instead, says so, and
// returns the good commit given in given (empty otherwise).
func bisectResolve(ctx context.Context, env *Env, cfg *config.Config, repo *build.Repo, goodRev, badRev string) (good, bad build.Commit, given string, err error) {
	resolve := func(rev, which string) (build.Commit, error) {
		c, err := repo.Resolve(rev)
		if err != nil && repo.Remote() != "" {
			fmt.Fprintf(env.Stderr, "%v; fetching %s from %s\n", err, cfg.Branch, repo.Remote())
			if ferr := repo.Fetch(ctx, cfg.Branch); ferr != nil {
				return c, ferr
			}
			c, err = repo.Resolve(rev)
		}
		if err != nil {
			return c, fmt.Errorf("%s revision: %w", which, err)
		}
		return c, nil
	}
	if good, err = resolve(goodRev, "good"); err != nil {
		return
	}
	if bad, err = resolve(badRev, "bad"); err != nil {
		return
	}
	if good.Hash == bad.Hash {
		return good, bad, "", usageError("--good and --bad are the same commit %s: nothing to bisect", good.Short())
	}
	ok, err := repo.IsAncestor(good.Hash, bad.Hash)
	if err != nil {
		return good, bad, "", err
	}
	if ok {
		return good, bad, "", nil
	}
	if rev, _ := repo.IsAncestor(bad.Hash, good.Hash); rev {
		return good, bad, "", usageError("good %s is not an ancestor of bad %s: %s is the older one; swap --good and --bad", good.Short(), bad.Short(), bad.Short())
	}
	base, err := repo.MergeBase(good.Hash, bad.Hash)
	if err != nil {
		return good, bad, "", usageError("good %s is not an ancestor of bad %s (they are on diverging branches) and %v: choose a good commit that bad descends from", good.Short(), bad.Short(), err)
	}
	fmt.Fprintf(env.Stderr, "%s\n", bisect.MergeBaseNote(good.Short(), base.Short()))
	return base, bad, good.Hash, nil
}

// bisectNewState lists the range with each commit's build key.
func bisectNewState(ctx context.Context, env *Env, repo *build.Repo, b *build.Builder, in bisect.Inputs, good build.Commit) (*bisect.State, error) {
	list, err := repo.Range(in.Good, in.Bad, in.FirstParent)
	if err != nil {
		return nil, err
	}
	list = append([]build.Commit{good}, list...)
	fmt.Fprintf(env.Stderr, "computing the build keys of %d commits\n", len(list))
	commits := make([]bisect.Commit, len(list))
	for i, c := range list {
		k, err := b.Key(ctx, c.Hash)
		if err != nil {
			return nil, err
		}
		commits[i] = bisect.Commit{Hash: c.Hash, Subject: c.Subject, Author: c.Author, AuthorEmail: c.AuthorEmail, Date: c.Date, Key: k.ID}
		// The range is in topological order; a commit shares a build only
		// with the commit listed before it when that is its parent.
		commits[i].NoCompile = i > 0 && k.SameAsParent && k.ID == commits[i-1].Key
	}
	return bisect.NewState(in, commits, time.Now())
}

// bisectBuilder adapts build.Builder to bisect.Builder.
type bisectBuilder struct {
	b     *build.Builder
	cache map[string]bisectTarget
}

// bisectTarget is a build to measure, with the commit and build key its
// samples are stored under.
type bisectTarget struct {
	bench.Target
	Hash, Key string
}

func (a *bisectBuilder) Build(ctx context.Context, hash string) (bisect.Target, error) {
	if t, ok := a.cache[hash]; ok {
		return t, nil
	}
	inst, err := a.b.Build(ctx, hash)
	var be *build.Error
	if errors.As(err, &be) {
		return nil, &bisect.BrokenError{Reason: fmt.Sprintf("%s failed: %s", be.Phase, bisectErrorLine(be.Tail)), LogPath: be.LogPath}
	}
	if err != nil {
		return nil, err
	}
	t := bisectTarget{
		Target: bench.Target{Name: build.Short(hash), BinDir: inst.BinDir(), BuildOptions: inst.Options.String()},
		Hash:   hash, Key: inst.Key,
	}
	if a.cache == nil {
		a.cache = map[string]bisectTarget{}
	}
	a.cache[hash] = t
	return t, nil
}

// bisectErrorLine picks the line of a build log's tail that says what
// went wrong: the last one mentioning an error, else the last one.
func bisectErrorLine(tail string) string {
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "error:") {
			return strings.TrimSpace(lines[i])
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// bisectMeasurer adapts bench.Runner to bisect.Measurer: one run of the
// scenario at the point, the value of the metric. Every metric of every
// run goes to the results store's samples, under the bisection's ID.
type bisectMeasurer struct {
	runner  *bench.Runner
	sc      *bench.Scenario
	point   bench.Point
	metric  string
	results *store.Store
	id      string         // the bisection's
	taken   map[string]int // samples of each commit in the store
	env     *bench.Environment
}

func (m *bisectMeasurer) Measure(ctx context.Context, target bisect.Target) (float64, error) {
	t := target.(bisectTarget)
	s, err := m.runner.Run(ctx, m.sc, t.Target, m.point)
	var me *bench.MeasureError
	if errors.As(err, &me) {
		return 0, &bisect.UnmeasurableError{Reason: me.Reason(), ServerLog: me.LogTail, LogPath: me.LogPath}
	}
	if err != nil {
		return 0, err
	}
	v, ok := s.Values[m.metric]
	if !ok {
		return 0, fmt.Errorf("scenario %s gave no value for metric %s", m.sc.Name, m.metric)
	}
	if m.env == nil {
		m.env = &s.Env
	}
	if err := m.store(ctx, t, s); err != nil {
		return 0, err
	}
	return v, nil
}

// store adds the run's values to the samples table.
func (m *bisectMeasurer) store(ctx context.Context, t bisectTarget, s *bench.Sample) error {
	if m.taken == nil {
		m.taken = map[string]int{}
	}
	index, ok := m.taken[t.Hash]
	if !ok {
		// Samples an interrupted process of this bisection stored.
		had, err := m.results.Samples(ctx, store.SampleQuery{BisectionID: m.id, Commit: t.Hash, Scenario: m.sc.Name,
			Point: m.point.String(), Metric: m.metric})
		if err != nil {
			return err
		}
		index = len(had)
	}
	info, _ := json.Marshal(s.Env)
	envID, err := m.results.Environment(ctx, info)
	if err != nil {
		return err
	}
	var rows []store.Sample
	for _, spec := range m.sc.MetricSpecs() {
		if v, ok := s.Values[spec.Name]; ok {
			rows = append(rows, store.Sample{BuildKey: t.Key, Commit: t.Hash, Scenario: m.sc.Name, Point: m.point.String(),
				Metric: spec.Name, Value: v, Index: index, Time: s.Start.Add(s.Elapsed), EnvironmentID: envID, BisectionID: m.id})
		}
	}
	if err := m.results.AddSamples(ctx, rows); err != nil {
		return err
	}
	m.taken[t.Hash] = index + 1
	return nil
}

// environment is the machine of the first sample (of this or an earlier
// process of the same bisection).
func (m *bisectMeasurer) environment(ctx context.Context) notify.Environment {
	e := m.env
	if e == nil {
		samples, err := m.results.Samples(ctx, store.SampleQuery{BisectionID: m.id, AnyPoint: true})
		if err != nil || len(samples) == 0 || samples[0].EnvironmentID == 0 {
			return notify.Environment{}
		}
		info, err := m.results.EnvironmentInfo(ctx, samples[0].EnvironmentID)
		var saved bench.Environment
		if err != nil || json.Unmarshal(info, &saved) != nil {
			return notify.Environment{}
		}
		e = &saved
	}
	host, _ := os.Hostname()
	return notify.Environment{Host: host, Kernel: e.Kernel, CPU: e.CPU, Cores: e.Cores, MemoryMB: e.MemoryBytes >> 20,
		Governor: e.Governor, Filesystem: e.Filesystem, LoadAvg: e.LoadAvg[0],
		Extra: map[string]string{"thp": e.THP, "server": e.ServerVersion}}
}

// bisectSettings are the server settings the bisection ran with, templates
// expanded for its variables and point.
func bisectSettings(sc *bench.Scenario, pt bench.Point) map[string]string {
	out, err := sc.SettingsAt(pt)
	if err != nil {
		// The scenario was expanded for every sample already; this is
		// not expected, and the report should still be written.
		out = map[string]string{}
		for k, v := range sc.Settings {
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

func bisectSystem(o build.Options) string {
	if o.Meson {
		return "meson"
	}
	return "autoconf"
}

// bisectReproduce is the command line that runs (or resumes) the same
// bisection.
func bisectReproduce(req bisectRequest, st *bisect.State) string {
	in := st.Inputs
	parts := []string{"pgbisect bisect", "-s", in.Scenario, "--good", build.Short(in.Good), "--bad", build.Short(in.Bad),
		"--repo", in.Repo, "--metric", in.Metric}
	if in.Point != "" {
		parts = append(parts, "--point", in.Point)
	}
	if in.FirstParent {
		parts = append(parts, "--first-parent")
	}
	parts = append(parts, "--min-effect", fmt.Sprint(in.Thresholds.MinEffect), "--max-samples", fmt.Sprint(in.Thresholds.MaxSamples),
		"--alpha", fmt.Sprint(in.Thresholds.Alpha))
	keys := make([]string, 0, len(in.Set))
	for k := range in.Set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts = append(parts, "--set", k+"="+in.Set[k])
	}
	return strings.Join(parts, " ")
}

// bisectPost posts a finding recorded in box, as 'pgbisect post ID' does.
func bisectPost(ctx context.Context, env *Env, cfg *config.Config, box *outbox.DB, id string) error {
	p, err := notify.NewPoster(cfg.GitHub.Options())
	if err != nil {
		return err
	}
	p.Log = env.Log
	unlock, err := box.Lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := box.Load(ctx, id)
	if err != nil {
		return err
	}
	posts, err := p.PostFinding(ctx, cur.Finding, cur.Posts, func(pst notify.Post) error { return box.MarkPosted(ctx, id, pst) })
	for _, pst := range posts {
		fmt.Fprintf(env.Stderr, "posted: %s\n", postLine(pst))
	}
	return err
}

// onceHandler passes each distinct warning message once: a bisection takes
// hundreds of samples, and "machine is busy" on every one of them would
// bury the progress lines.
type onceHandler struct {
	slog.Handler
	mu   sync.Mutex
	seen map[string]bool
}

func (h *onceHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.mu.Lock()
		dup := h.seen[r.Message]
		if h.seen == nil {
			h.seen = map[string]bool{}
		}
		h.seen[r.Message] = true
		h.mu.Unlock()
		if dup {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

// bisectPrintResult prints the outcome, the culprits and the report files.
func bisectPrintResult(w io.Writer, out *bisectOutcome) {
	st := out.State
	fmt.Fprintf(w, "bisection %s: %s\n%s\n", st.ID, st.Outcome, st.Summary)
	for i, c := range st.Culprits {
		last := st.Commits[c.Last]
		fmt.Fprintf(w, "\nculprit %d: %s %s\n  author %s, %s\n  %s against %s (fresh samples)\n", i+1, last.Short(), last.Subject,
			last.Author, last.Date.Format("2006-01-02"), st.Effect(c.Result), st.Commits[c.Parent].Short())
		if len(c.Candidates) > 1 {
			fmt.Fprintf(w, "  a range of %d candidates: %s\n", len(c.Candidates), c.Note)
			for _, i := range c.Candidates {
				fmt.Fprintf(w, "    %s %s\n", st.Commits[i].Short(), st.Commits[i].Subject)
			}
		}
	}
	for _, u := range st.Unresolved {
		fmt.Fprintf(w, "\nunresolved: %s..%s: %s\n", st.Commits[u.First].Short(), st.Commits[u.Last].Short(), u.Note)
	}
	fmt.Fprintf(w, "\n%d builds, %d samples in %s (%s building, %s measuring)\n", st.BuildsDone, st.SamplesTaken,
		bisectWall(st).Round(time.Second), st.BuildTime.Round(time.Second), st.MeasureTime.Round(time.Second))
	fmt.Fprintf(w, "report: %s\n        %s\n        %s\n", filepath.Join(out.ReportDir, notify.ReportMarkdown),
		filepath.Join(out.ReportDir, notify.ReportText), filepath.Join(out.ReportDir, notify.ReportJSON))
	fmt.Fprintf(w, "finding %s: 'pgbisect report %s' shows it, 'pgbisect post %s' posts it\n", out.Finding.ID, st.ID, st.ID)
}

// bisectWall is how long the bisection took, start to outcome (a finished
// bisection resumed later is saved again).
func bisectWall(st *bisect.State) time.Duration {
	end := st.Updated
	if n := len(st.Events); n > 0 && st.Done() {
		end = st.Events[n-1].Time
	}
	return end.Sub(st.Started)
}
