package nightly

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/store"
)

// world is a simulated repository with a known truth: the true median of
// the scenario's metric at each commit and the commits that do not build.
// It stands in for git, the compiler and PostgreSQL so the pass's decisions
// can be checked over many nights in seconds; the real results store keeps
// what the pass records. nightly_e2e_test.go runs the pass for real.
type world struct {
	t       *testing.T
	branch  string
	order   []string // hashes, oldest first
	commits map[string]build.Commit
	level   map[string]float64
	broken  map[string]bool
	noise   float64
	rng     *rand.Rand

	built    []string
	samples  int
	bisects  []BisectRequest
	findings []*finding.Finding
}

func newWorld(t *testing.T, noise float64, seed uint64) *world {
	return &world{
		t: t, branch: strings.ReplaceAll(t.Name(), "/", "_"), noise: noise, rng: rand.New(rand.NewPCG(seed, 2)),
		commits: map[string]build.Commit{}, level: map[string]float64{}, broken: map[string]bool{},
	}
}

// commit appends a commit whose server has the given true level.
func (w *world) commit(level float64, broken bool) string {
	n := len(w.order) + 1
	hash := fmt.Sprintf("%08x%032x", len(w.branch)*1000+n, n)
	c := build.Commit{Hash: hash, Subject: fmt.Sprintf("commit %d", n), Author: "A. Hacker", AuthorEmail: "a@example.org"}
	if len(w.order) > 0 {
		c.Parents = []string{w.order[len(w.order)-1]}
	}
	w.order = append(w.order, hash)
	w.commits[hash] = c
	w.level[hash] = level
	w.broken[hash] = broken
	return hash
}

func (w *world) Fetch(context.Context, string) error { return nil }

func (w *world) Resolve(rev string) (build.Commit, error) {
	if rev == w.branch && len(w.order) > 0 {
		return w.commits[w.order[len(w.order)-1]], nil
	}
	if c, ok := w.commits[rev]; ok {
		return c, nil
	}
	return build.Commit{}, fmt.Errorf("unknown revision %q", rev)
}

func (w *world) Build(_ context.Context, hash string) (*build.Install, error) {
	w.built = append(w.built, hash)
	if w.broken[hash] {
		return nil, &build.Error{Commit: hash, Phase: "make", LogPath: "/logs/" + hash, Tail: "error: syntax error", Err: errors.New("exit status 2")}
	}
	return &build.Install{Key: "key-" + build.Short(hash), Commit: hash, Prefix: "/fake/" + hash}, nil
}

func (w *world) Run(_ context.Context, sc *bench.Scenario, t bench.Target, pt bench.Point) (*bench.Sample, error) {
	hash := strings.TrimSuffix(strings.TrimPrefix(t.BinDir, "/fake/"), "/bin")
	lvl, ok := w.level[hash]
	if !ok {
		w.t.Fatalf("sampled unknown build %q", t.BinDir)
	}
	w.samples++
	return &bench.Sample{Target: t.Name, Values: map[string]float64{"time": lvl * (1 + w.noise*w.rng.NormFloat64())}}, nil
}

func (w *world) bisect(_ context.Context, req BisectRequest) (*finding.Finding, error) {
	w.bisects = append(w.bisects, req)
	return &finding.Finding{ID: finding.NewID(testNow, req.Scenario.Name, req.Bad.Hash), Kind: finding.Regression,
		Scenario: req.Scenario.Name, Metric: req.Metric, Good: notifyCommit(req.Good), Bad: notifyCommit(req.Bad)}, nil
}

func (w *world) pass(st *store.Store, sc *bench.Scenario) *Pass {
	return &Pass{
		Branch: w.branch, Scenarios: []*bench.Scenario{sc},
		Repo: w, Builder: w, Sampler: w, Store: st,
		Bisect: w.bisect,
		Report: func(_ context.Context, f *finding.Finding) error {
			w.findings = append(w.findings, f)
			return nil
		},
	}
}

func (w *world) run(t *testing.T, p *Pass) *Result {
	t.Helper()
	before := len(w.findings)
	res, err := p.Run(context.Background())
	if err != nil {
		t.Fatalf("pass at %s: %v", build.Short(w.order[len(w.order)-1]), err)
	}
	t.Logf("pass at %s: %s, %d new findings, %d samples so far", build.Short(res.Run.Commit), res.Run.Status, len(w.findings)-before, w.samples)
	return res
}

var tinyScenario = `
name: tiny
workload:
  - name: q
    sql: SELECT 1
metrics:
  - name: time
    step: q
    value: elapsed
    unit: ms
    direction: lower
`

func loadTiny(t *testing.T) *bench.Scenario {
	sc, err := bench.Load([]byte(tinyScenario), "tiny.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestPassNightByNight(t *testing.T) {
	st := testStore(t)
	sc := loadTiny(t)
	w := newWorld(t, 0.01, 1)
	c1 := w.commit(100, false)

	res := w.run(t, w.pass(st, sc))
	if res.Run.Status != StatusFirst || w.samples != 5 {
		t.Fatalf("first pass: status %s with %d samples, want first with 5", res.Run.Status, w.samples)
	}
	series, err := st.Series(context.Background(), w.branch, "tiny", "time", "")
	if err != nil || len(series) != 1 || series[0].Commit != c1 || len(series[0].Values) != 5 {
		t.Fatalf("series after the first pass: %+v, %v", series, err)
	}

	taken := w.samples
	if res := w.run(t, w.pass(st, sc)); res.Run.Status != StatusUnchanged || w.samples != taken {
		t.Fatalf("second pass on the same head: status %s, %d new samples", res.Run.Status, w.samples-taken)
	}

	// Three new commits; the middle one is 20% slower.
	w.commit(100, false)
	bad := w.commit(120, false)
	_ = bad
	c4 := w.commit(120, false)
	res = w.run(t, w.pass(st, sc))
	if res.Run.Status != StatusRegression {
		t.Fatalf("status %s, want regression (results %+v)", res.Run.Status, res.Detail.Results)
	}
	if len(w.bisects) != 1 || w.bisects[0].Good.Hash != c1 || w.bisects[0].Bad.Hash != c4 || w.bisects[0].Metric != "time" {
		t.Fatalf("bisections %+v, want one of time between %s and %s", w.bisects, build.Short(c1), build.Short(c4))
	}
	if len(w.findings) != 1 || w.findings[0].Series == nil || w.findings[0].Branch != w.branch {
		t.Fatalf("findings %+v, want the bisection's, with the series", w.findings)
	}

	// The head stays broken for two nights: one finding, not two.
	b1 := w.commit(0, true)
	if res := w.run(t, w.pass(st, sc)); res.Run.Status != StatusBuildFailed {
		t.Fatalf("broken head: status %s", res.Run.Status)
	}
	w.commit(0, true)
	if res := w.run(t, w.pass(st, sc)); res.Run.Status != StatusBuildFailed {
		t.Fatalf("still broken head: status %s", res.Run.Status)
	}
	var failures []*finding.Finding
	for _, f := range w.findings {
		if f.Kind == finding.BuildFailure {
			failures = append(failures, f)
		}
	}
	if len(failures) != 1 || failures[0].Bad.Hash != b1 || failures[0].Good.Hash != c4 || !strings.Contains(strings.Join(failures[0].Warnings, "\n"), "syntax error") {
		t.Fatalf("build failure findings %+v, want one for %s with the log tail", failures, build.Short(b1))
	}

	// Fixed, and 10% faster than the last measured night (c4): compared
	// with c4, not with the broken nights.
	c7 := w.commit(108, false)
	res = w.run(t, w.pass(st, sc))
	if res.Run.Status != StatusImprovement || res.Detail.Base != c4 {
		t.Fatalf("status %s against %s, want improvement against %s", res.Run.Status, build.Short(res.Detail.Base), build.Short(c4))
	}
	last := w.findings[len(w.findings)-1]
	if last.Kind != finding.Improvement || last.Bad.Hash != c7 || len(last.Comparisons) != 1 || last.Comparisons[0].Ratio > 0.95 {
		t.Fatalf("improvement finding %+v", last)
	}
	if len(w.bisects) != 1 {
		t.Fatalf("an improvement was bisected: %+v", w.bisects)
	}

	// --force measures an unchanged head again.
	p := w.pass(st, sc)
	p.Force = true
	if res := w.run(t, p); res.Run.Status != StatusOK {
		t.Fatalf("forced pass on an unchanged head: %s, want ok", res.Run.Status)
	}
}

// A slow ramp: each night is 1% slower than the one before, under the
// noise of one night's samples, so a night-to-night comparison seldom calls
// it a regression; the change-point pass over the series must. (At 3% noise
// and 30 samples a side a 1% step is called a regression about 7% of the
// time, so over the 11 steps a night or two may be; 4 or more happen with
// probability 0.003.)
func TestPassChangePointCatchesSlowRamp(t *testing.T) {
	st := testStore(t)
	sc := loadTiny(t)
	w := newWorld(t, 0.03, 3)
	var levels []float64
	for range 8 {
		levels = append(levels, 100)
	}
	for i := range 10 {
		levels = append(levels, 101+float64(i))
	}
	for range 6 {
		levels = append(levels, 110)
	}
	var stepped []string
	for _, l := range levels {
		w.commit(l, false)
		if res := w.run(t, w.pass(st, sc)); res.Run.Status == StatusRegression {
			stepped = append(stepped, fmt.Sprintf("%+v", res.Detail.Results))
		}
	}
	if len(stepped) > 3 {
		t.Errorf("night-to-night comparisons called a 1%% step a regression %d times:\n%s", len(stepped), strings.Join(stepped, "\n"))
	}
	// Detection may come while the ramp is still going: the range must
	// start before it and end at least 4% up it.
	var cp *BisectRequest
	for i, b := range w.bisects {
		if w.level[b.Good.Hash] == 100 && w.level[b.Bad.Hash] >= 104 {
			cp = &w.bisects[i]
		}
	}
	if cp == nil {
		t.Fatalf("no bisection across the ramp; bisections: %+v", w.bisects)
	}
	t.Logf("ramp bisected between %s (%.0f) and %s (%.0f)", build.Short(cp.Good.Hash), w.level[cp.Good.Hash], build.Short(cp.Bad.Hash), w.level[cp.Bad.Hash])
	var confirmed bool
	for _, f := range w.findings {
		if f.Series != nil {
			for _, c := range f.Series.ChangePoints {
				confirmed = confirmed || c.Confirmed
			}
		}
	}
	if !confirmed {
		t.Error("no finding shows a confirmed change point in its series")
	}
	// Later nights do not bisect the same shift again.
	n := len(w.bisects)
	w.commit(110, false)
	w.run(t, w.pass(st, sc))
	w.commit(110, false)
	w.run(t, w.pass(st, sc))
	if len(w.bisects) != n {
		t.Errorf("the same shift was bisected again: %+v", w.bisects[n:])
	}
}

// A single bad night is not a shift: the change-point pass must not
// bisect it (and its confirmation, if any, must not be believed).
func TestPassChangePointIgnoresOneBadNight(t *testing.T) {
	st := testStore(t)
	sc := loadTiny(t)
	w := newWorld(t, 0.01, 4)
	for i := range 16 {
		w.commit(100, false)
		if i == 8 {
			w.noise = 0.3 // one noisy night: a neighbour ran a backup
		}
		w.run(t, w.pass(st, sc))
		w.noise = 0.01
	}
	for _, b := range w.bisects {
		t.Errorf("bisected %s..%s in a flat series", build.Short(b.Good.Hash), build.Short(b.Bad.Hash))
	}
}

// TestPassHonoursScenarioThresholds: a night 10% slower than the last is
// a regression under the defaults (3%), but not for a scenario whose stats
// section, or a metric whose min_effect, says only 20% matters; a metric's
// min_effect wins over its scenario's, and the bisection gets it.
func TestPassHonoursScenarioThresholds(t *testing.T) {
	st := testStore(t)
	for _, tt := range []struct {
		name, stats, metric string
		want                string
		minEffect           float64 // of the bisection, when one runs
	}{
		{"defaults", "", "", StatusRegression, 0.03},
		{"scenario", "stats:\n  min_effect: 0.2\n", "", StatusOK, 0},
		{"metric", "", "    min_effect: 0.2\n", StatusOK, 0},
		{"metric over scenario", "stats:\n  min_effect: 0.2\n", "    min_effect: 0.05\n", StatusRegression, 0.05},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc, err := bench.Load([]byte(tt.stats+tinyScenario+tt.metric), "tiny.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			w := newWorld(t, 0.01, 5)
			w.commit(100, false)
			w.run(t, w.pass(st, sc))
			w.commit(110, false)
			res := w.run(t, w.pass(st, sc))
			if res.Run.Status != tt.want || len(res.Detail.Results) != 1 {
				t.Fatalf("status %s (results %+v), want %s", res.Run.Status, res.Detail.Results, tt.want)
			}
			if r := res.Detail.Results[0]; math.Abs(r.Change-0.10) > 0.02 {
				t.Errorf("measured change %+.3f, want about +0.10", r.Change)
			}
			switch {
			case tt.minEffect == 0 && len(w.bisects) != 0:
				t.Errorf("bisected a change below the smallest effect: %+v", w.bisects)
			case tt.minEffect > 0 && (len(w.bisects) != 1 || w.bisects[0].Thresholds.MinEffect != tt.minEffect):
				t.Errorf("bisections %+v, want one with min_effect %g", w.bisects, tt.minEffect)
			}
		})
	}
}
