package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/base/redact"
	"github.com/pgbisect/pgbisect/internal/base/strictyaml"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

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
	return bench.Metric{}, badRequest("scenario %s has no metric %q%s; it has: %s", sc.Name, name, hint, strings.Join(names, ", "))
}

// bisectPoint finds the matrix point to bisect at.
func bisectPoint(sc *bench.Scenario, p string) (bench.Point, error) {
	if p != "" {
		pt, err := sc.FindPoint(p)
		if err != nil {
			return bench.Point{}, badRequest("%v", err)
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
	return bench.Point{}, badRequest("scenario %s has %d matrix points: choose one with --point (%s)", sc.Name, len(points), strings.Join(names, ", "))
}

// bisectResolve resolves both revisions and checks that good is an
// ancestor of bad. When they are on diverging branches (REL_15_0 and
// REL_16_0), it bisects from their merge base instead, says so, and
// returns the good commit given in given (empty otherwise).
func (a *App) bisectResolve(ctx context.Context, repo *build.Repo, goodRev, badRev string, sink Sink) (good, bad build.Commit, given string, err error) {
	resolve := func(rev, which string) (build.Commit, error) {
		c, err := a.resolve(ctx, repo, rev, sink)
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
		return good, bad, "", badRequest("--good and --bad are the same commit %s: nothing to bisect", good.Short())
	}
	ok, err := repo.IsAncestor(good.Hash, bad.Hash)
	if err != nil {
		return good, bad, "", err
	}
	if ok {
		return good, bad, "", nil
	}
	if rev, _ := repo.IsAncestor(bad.Hash, good.Hash); rev {
		return good, bad, "", badRequest("good %s is not an ancestor of bad %s: %s is the older one; swap --good and --bad", good.Short(), bad.Short(), bad.Short())
	}
	base, err := repo.MergeBase(good.Hash, bad.Hash)
	if err != nil {
		return good, bad, "", badRequest("good %s is not an ancestor of bad %s (they are on diverging branches) and %v: choose a good commit that bad descends from", good.Short(), bad.Short(), err)
	}
	sink.note("%s", bisect.MergeBaseNote(good.Short(), base.Short()))
	return base, bad, good.Hash, nil
}

// bisectNewState lists the range with each commit's build key.
func bisectNewState(ctx context.Context, repo *build.Repo, b *build.Builder, in bisect.Inputs, good build.Commit, sink Sink) (*bisect.State, error) {
	list, err := repo.Range(in.Good, in.Bad, in.FirstParent)
	if err != nil {
		return nil, err
	}
	list = append([]build.Commit{good}, list...)
	newState := bisect.NewState
	if len(in.Points) > 0 {
		newState = bisect.NewCurveState
	}
	sink.note("computing the build keys of %d commits", len(list))
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
	return newState(in, commits, time.Now())
}

// bisectBuilder adapts build.Builder to bisect.Builder.
type bisectBuilder struct {
	b     *build.Builder
	sink  Sink
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
	a.sink.emit(Event{Kind: KindBuildStarted, Commit: hash})
	inst, err := a.b.Build(ctx, hash)
	var be *build.Error
	if errors.As(err, &be) {
		reason := fmt.Sprintf("%s failed: %s", be.Phase, bisectErrorLine(be.Tail))
		a.sink.emit(Event{Kind: KindBuildFailed, Commit: hash, Error: reason})
		return nil, &bisect.BrokenError{Reason: reason, LogPath: be.LogPath}
	}
	if err != nil {
		a.sink.emit(Event{Kind: KindBuildFailed, Commit: hash, Error: err.Error()})
		return nil, err
	}
	a.sink.emit(Event{Kind: KindBuildFinished, Commit: hash, Target: inst.BinDir()})
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
	points  []bench.Point // of a bisection of several points (MeasureAt)
	metric  string
	results *store.Store
	id      string         // the bisection's
	state   *bisect.State  // the bisection, for the clock of each sample
	taken   map[string]int // samples of each commit in the store
	env     *bench.Environment
	sink    Sink
}

func (m *bisectMeasurer) Measure(ctx context.Context, target bisect.Target) (float64, error) {
	return m.measureAt(ctx, target, m.point)
}

func (m *bisectMeasurer) measureAt(ctx context.Context, target bisect.Target, point bench.Point) (float64, error) {
	t := target.(bisectTarget)
	s, err := m.runner.Run(ctx, m.sc, t.Target, point)
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
	first, err := m.firstEnv(ctx)
	if err != nil {
		return 0, err
	}
	if first != nil {
		// A bisection resumed elsewhere must count as it began.
		if err := bench.CheckCounter(*first, s.Env); err != nil {
			return 0, err
		}
	} else {
		m.env = &s.Env
	}
	if err := m.store(ctx, t, s, point); err != nil {
		return 0, err
	}
	m.sink.emit(Event{Kind: KindSample, Bisection: m.id, Commit: t.Hash, Target: t.Name, Point: point.String(),
		Metric: m.metric, Value: v, Done: m.taken[t.Hash+"@"+point.String()]})
	return v, nil
}

// store adds the run's values to the samples table.
func (m *bisectMeasurer) store(ctx context.Context, t bisectTarget, s *bench.Sample, point bench.Point) error {
	if m.taken == nil {
		m.taken = map[string]int{}
	}
	taken := t.Hash + "@" + point.String()
	index, ok := m.taken[taken]
	if !ok {
		// Samples an interrupted process of this bisection stored.
		had, err := m.results.Samples(ctx, store.SampleQuery{BisectionID: m.id, Commit: t.Hash, Scenario: m.sc.Name,
			Point: point.String(), Metric: m.metric})
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
			rows = append(rows, store.Sample{BuildKey: t.Key, Commit: t.Hash, Scenario: m.sc.Name, Point: point.String(),
				Metric: spec.Name, Value: v, Index: index, Time: s.Start.Add(s.Elapsed), EnvironmentID: envID, BisectionID: m.id, Seq: m.seq()})
		}
	}
	if err := m.results.AddSamples(ctx, rows); err != nil {
		return err
	}
	m.taken[taken] = index + 1
	return nil
}

// seq is the bisection's clock for the sample being taken: the engine
// records it after Measure returns.
func (m *bisectMeasurer) seq() int {
	if m.state == nil {
		return -1
	}
	return m.state.SamplesTaken
}

// firstEnv is the environment of the bisection's first sample, of this
// process or an earlier one (nil before any). A store that cannot answer
// is an error, never "no sample yet": a resumed bisection would otherwise
// skip the check that it counts as it began.
func (m *bisectMeasurer) firstEnv(ctx context.Context) (*bench.Environment, error) {
	if m.env != nil {
		return m.env, nil
	}
	samples, err := m.results.Samples(ctx, store.SampleQuery{BisectionID: m.id, AnyPoint: true})
	if err != nil {
		return nil, fmt.Errorf("reading the bisection's first sample: %w", err)
	}
	if len(samples) == 0 || samples[0].EnvironmentID == 0 {
		return nil, nil
	}
	info, err := m.results.EnvironmentInfo(ctx, samples[0].EnvironmentID)
	if err != nil {
		return nil, fmt.Errorf("reading the environment of the bisection's first sample: %w", err)
	}
	var saved bench.Environment
	if err := json.Unmarshal(info, &saved); err != nil {
		return nil, fmt.Errorf("environment %d of the bisection's first sample is not valid JSON: %w", samples[0].EnvironmentID, err)
	}
	m.env = &saved
	return m.env, nil
}

// counter is what counted the bisection's samples ("" for times).
func (m *bisectMeasurer) counter(ctx context.Context) (string, error) {
	e, err := m.firstEnv(ctx)
	if e == nil || err != nil {
		return "", err
	}
	return e.Counter, nil
}

// environment is the machine of the first sample (of this or an earlier
// process of the same bisection).
func (m *bisectMeasurer) environment(ctx context.Context) (finding.Environment, error) {
	e, err := m.firstEnv(ctx)
	if e == nil || err != nil {
		return finding.Environment{}, err
	}
	host, _ := os.Hostname()
	if used := m.machines(ctx); used != "" {
		host = used
	}
	f := finding.Environment{Host: host, Kernel: e.Kernel, CPU: e.CPU, Cores: e.Cores, MemoryMB: e.MemoryBytes >> 20,
		Governor: e.Governor, Filesystem: e.Filesystem, LoadAvg: e.LoadAvg[0],
		Extra: map[string]string{"thp": e.THP, "server": e.ServerVersion}}
	if e.CPUs != nil { // the scenario's cpus: pinned the samples
		f.Extra["cpus"] = fmt.Sprintf("server on %s, pgbisect and clients on %s", e.CPUs.Server, e.CPUs.Client)
	}
	return f, nil
}

// machines lists the machines that measured the bisection's samples, when
// they were recorded (daemon jobs record them; see internal/front/jobs): a job
// taken over from a dead machine has two.
func (m *bisectMeasurer) machines(ctx context.Context) string {
	samples, err := m.results.Samples(ctx, store.SampleQuery{BisectionID: m.id, AnyPoint: true})
	if err != nil {
		return ""
	}
	var names []string
	for _, s := range samples {
		if s.Machine != "" && !slices.Contains(names, s.Machine) {
			names = append(names, s.Machine)
		}
	}
	return strings.Join(names, ", ")
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
func bisectReproduce(st *bisect.State) string {
	in := st.Inputs
	parts := []string{"pgbisect bisect", "-s", in.Scenario, "--good", build.Short(in.Good), "--bad", build.Short(in.Bad),
		"--repo", redact.String(in.Repo), "--metric", in.Metric}
	switch {
	case len(in.Points) > 0:
		parts = append(parts, "--point", "'"+finding.PointList(in.Points)+"'")
	case in.Point != "":
		parts = append(parts, "--point", in.Point)
	}
	if in.FirstParent {
		parts = append(parts, "--first-parent")
	}
	if st.Exhaustive {
		parts = append(parts, "--exhaustive")
	}
	parts = append(parts, "--min-effect", fmt.Sprint(in.Thresholds.MinEffect), "--max-samples", fmt.Sprint(in.Thresholds.MaxSamples),
		"--alpha", fmt.Sprint(in.Thresholds.Alpha))
	parts = append(parts, setFlags(in.Set)...)
	return strings.Join(parts, " ")
}

// post posts a finding recorded in box, as 'pgbisect post ID' does.
func (a *App) post(ctx context.Context, box *store.Store, id string, sink Sink) error {
	return a.withChannel(ctx, box, id, func(ch notify.Channel, cur finding.Outgoing) error {
		posts, err := ch.PostFinding(ctx, cur.Finding, cur.Posts, func(pst finding.Post) error { return box.MarkPosted(ctx, id, pst) })
		for _, pst := range posts {
			sink.note("posted: %s", PostLine(pst))
		}
		return err
	})
}

// withChannel runs do with the channel findings are posted to and finding
// id as the store has it now, under the store's post lock, so that posting
// and editing a finding's posts never race another process.
func (a *App) withChannel(ctx context.Context, box *store.Store, id string, do func(notify.Channel, finding.Outgoing) error) error {
	ch, err := a.channel()
	if err != nil {
		return err
	}
	unlock, err := box.Lock(ctx, store.PostLock)
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := box.LoadFinding(ctx, id)
	if err != nil {
		return err
	}
	return do(ch, cur)
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
