package finding_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/notify"
)

// lab is a history of commits the engine bisects for real: level[i] is the
// true median of commit i, doc-only commits share their parent's build,
// broken ones do not build, crash ones cannot be measured. Samples are
// deterministic per (commit, attempt).
type lab struct {
	commits []bisect.Commit
	level   []float64
	broken  map[int]bool
	crash   map[int]bool
	taken   map[int]int
	// noise is the relative standard deviation of a run: 3% by default,
	// 0.2% for the count-like metric the stop-when-explained rule serves.
	noise float64
}

func newLab(n int, doc []int, effects map[int]float64, broken, crash []int) *lab {
	l := &lab{commits: make([]bisect.Commit, n), level: make([]float64, n), broken: map[int]bool{}, crash: map[int]bool{}, taken: map[int]int{}, noise: 0.03}
	owner, level := 0, 1.0
	for i := range n {
		isDoc := slices.Contains(doc, i)
		if !isDoc {
			owner = i
		}
		level *= 1 + effects[i]
		l.level[i] = level
		l.commits[i] = bisect.Commit{Hash: fmt.Sprintf("%02x%038x", i, i), Subject: fmt.Sprintf("commit %d", i),
			Key: fmt.Sprintf("key%d", owner), NoCompile: isDoc}
	}
	for _, b := range broken {
		l.broken[b] = true
	}
	for _, c := range crash {
		l.crash[c] = true
	}
	return l
}

func (l *lab) Build(_ context.Context, hash string) (bisect.Target, error) {
	i := slices.IndexFunc(l.commits, func(c bisect.Commit) bool { return c.Hash == hash })
	if l.broken[i] {
		return nil, &bisect.BrokenError{Reason: "simulated compile error"}
	}
	return i, nil
}

func (l *lab) Measure(_ context.Context, t bisect.Target) (float64, error) {
	i := t.(int)
	if l.crash[i] {
		return 0, &bisect.UnmeasurableError{Reason: "the server crashed (start): PANIC:  injected", ServerLog: "LOG:  starting\nPANIC:  injected"}
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d", i, l.taken[i])
	l.taken[i]++
	rng := rand.New(rand.NewPCG(h.Sum64(), 7))
	return 100 * l.level[i] * (1 + l.noise*rng.NormFloat64()), nil
}

func (l *lab) run(t *testing.T, dir stats.Direction) *bisect.State {
	t.Helper()
	in := bisect.Inputs{Repo: "test", Good: l.commits[0].Hash, Bad: l.commits[len(l.commits)-1].Hash, Scenario: "/x/copy-single.yaml",
		Metric: "elapsed", Direction: dir, Thresholds: stats.Thresholds{Alpha: 0.05, MinEffect: 0.05, MaxSamples: 20}}
	s, err := bisect.NewState(in, l.commits, time.Date(2026, 1, 30, 2, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if err := (&bisect.Engine{Builder: l, Measurer: l}).Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFromBisection: two culprits ranked by effect with their authors, the
// log shows the broken commits tried and no doc-only commit, the ID names
// the bisection, and a merge-base start is the first warning.
func TestFromBisection(t *testing.T) {
	l := newLab(40, []int{3, 20}, map[int]float64{12: 0.15, 30: 0.3}, []int{28, 29}, nil)
	l.commits[12].Author, l.commits[12].AuthorEmail = "A. Hacker", "a@example.org"
	s := l.run(t, stats.LowerIsBetter)
	f := finding.FromBisection(s, finding.Report{Branch: "master", Reproduce: "pgbisect bisect ..."})
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if f.Kind != finding.Regression || len(f.Culprits) != 2 || f.Scenario != "copy-single" || f.Direction != stats.LowerIsBetter {
		t.Fatalf("kind %s with %d culprits, scenario %q, direction %q", f.Kind, len(f.Culprits), f.Scenario, f.Direction)
	}
	if f.Culprits[0].Commit.Hash != l.commits[30].Hash || f.Culprits[1].Commit.Author != "A. Hacker <a@example.org>" {
		t.Errorf("culprits not ranked by effect or authors lost: %+v", f.Culprits)
	}
	if c := f.Culprits[0].Comparisons[0]; c.Verdict != string(bisect.VerdictRegression) || c.Ratio < 1.2 || c.Good.N == 0 {
		t.Errorf("culprit comparison %+v", c)
	}
	unbuildable := 0
	for _, st := range f.Log {
		if st.Verdict == finding.StepUnbuildable {
			unbuildable++
		}
		if l.commits[st.Order].NoCompile {
			t.Errorf("log lists doc-only commit %d", st.Order)
		}
	}
	if unbuildable == 0 {
		t.Errorf("the log does not show the broken commits tried")
	}
	if sp := f.SamplesBy; sp == nil || sp.Endpoints+sp.Search+sp.Checks != s.SamplesTaken ||
		sp.Regression+sp.Same+sp.Smaller+sp.Improvement+sp.Undecided != s.SamplesTaken {
		t.Errorf("the finding's split of the runs %+v does not add up to %d", f.SamplesBy, s.SamplesTaken)
	}
	md := notify.Markdown(f, notify.Options{})
	if !strings.Contains(md, fmt.Sprintf("%d runs (endpoints %d, search %d", s.SamplesTaken, f.SamplesBy.Endpoints, f.SamplesBy.Search)) {
		t.Errorf("the report's footer does not say where the runs went")
	}
	for _, want := range []string{l.commits[30].Short(), l.commits[12].Short()} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks culprit %s", want)
		}
	}
	if f.ID != finding.BisectionID(s) || !strings.HasSuffix(f.ID, s.ID) || !strings.HasPrefix(f.ID, "20260130T020000Z-copy-single-") {
		t.Errorf("finding ID %q does not name bisection %s", f.ID, s.ID)
	}
	s.Inputs.GivenGood = "5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b"
	f = finding.FromBisection(s, finding.Report{Branch: "master"})
	if w := f.Warnings[0]; !strings.Contains(w, "good 5a6b7c8d9e is not an ancestor") || !strings.Contains(w, "merge base "+l.commits[0].Short()) {
		t.Errorf("first warning %q, want the merge-base note", w)
	}
}

// TestFromBisectionHigherIsBetter: a throughput that fell is a regression
// whose title gives the signed change and the direction.
func TestFromBisectionHigherIsBetter(t *testing.T) {
	l := newLab(30, nil, map[int]float64{11: -0.2}, nil, nil)
	s := l.run(t, stats.HigherIsBetter)
	if s.Outcome != bisect.OutcomeFound || len(s.Culprits) != 1 {
		t.Fatalf("outcome %s: %s", s.Outcome, s.Summary)
	}
	f := finding.FromBisection(s, finding.Report{Branch: "master"})
	want := fmt.Sprintf("elapsed %+.1f%% regression (higher is better)", 100*(s.Culprits[0].Result.Ratio-1))
	if f.Direction != stats.HigherIsBetter || f.Culprits[0].Comparisons[0].Direction != stats.HigherIsBetter || !strings.Contains(notify.Title(f), want) {
		t.Errorf("direction %q, title %q, want %q", f.Direction, notify.Title(f), want)
	}
}

// TestFromBisectionKinds: each way a bisection ends is its own kind of
// finding.
func TestFromBisectionKinds(t *testing.T) {
	tests := []struct {
		name string
		lab  *lab
		kind finding.Kind
	}{
		{"same", newLab(30, []int{4}, nil, nil, nil), finding.NoRegression},
		{"improvement", newLab(30, nil, map[int]float64{9: -0.3}, nil, nil), finding.Improvement},
		{"broken endpoint", newLab(10, nil, map[int]float64{5: 0.2}, []int{9}, nil), finding.BuildFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := finding.FromBisection(tt.lab.run(t, stats.LowerIsBetter), finding.Report{Branch: "master"})
			if f.Kind != tt.kind {
				t.Errorf("kind %s, want %s", f.Kind, tt.kind)
			}
			if err := f.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestFromBisectionUnmeasurable: a commit whose server crashes is in the
// log as unmeasurable with its server log, which the report shows; an
// endpoint that crashes makes a build-failure finding that shows it too.
func TestFromBisectionUnmeasurable(t *testing.T) {
	l := newLab(17, nil, map[int]float64{9: 0.25}, nil, []int{8})
	f := finding.FromBisection(l.run(t, stats.LowerIsBetter), finding.Report{})
	var skipped []int
	for _, st := range f.Log {
		if st.Verdict == finding.StepUnmeasurable {
			skipped = append(skipped, st.Order)
			if !strings.Contains(st.ServerLog, "PANIC") || !strings.Contains(st.Note, "crashed") {
				t.Errorf("log step of %d: note %q, server log %q", st.Order, st.Note, st.ServerLog)
			}
		}
	}
	if !slices.Equal(skipped, []int{8}) {
		t.Errorf("unmeasurable steps %v, want [8]", skipped)
	}
	if md := notify.MarkdownFile(f); !strings.Contains(md, "Server logs of commits that could not be measured") || !strings.Contains(md, "PANIC:  injected") {
		t.Errorf("the report lacks the server log:\n%s", md)
	}

	l = newLab(10, nil, map[int]float64{5: 0.2}, nil, []int{9})
	f = finding.FromBisection(l.run(t, stats.LowerIsBetter), finding.Report{})
	if f.Kind != finding.BuildFailure || !strings.Contains(notify.TextFile(f), "PANIC:  injected") {
		t.Errorf("finding %s lacks the endpoint's server log:\n%s", f.Kind, notify.TextFile(f))
	}
}

// TestFromBisectionGuided: a profile-guided bisection's finding says what
// the profile pointed at; an unguided one says nothing of it.
func TestFromBisectionGuided(t *testing.T) {
	l := newLab(30, nil, map[int]float64{11: 0.2}, nil, nil)
	in := bisect.Inputs{Repo: "test", Good: l.commits[0].Hash, Bad: l.commits[29].Hash, Scenario: "/x/copy-single.yaml",
		Metric: "elapsed", Direction: stats.LowerIsBetter, Thresholds: stats.Thresholds{Alpha: 0.05, MinEffect: 0.05, MaxSamples: 20}}
	s, err := bisect.NewState(in, l.commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	s.Guide = &bisect.Guide{}
	e := &bisect.Engine{Builder: l, Measurer: l, Guide: func(context.Context, *bisect.State) (bisect.Guide, error) {
		return bisect.Guide{Runs: 6, Pointers: []bisect.GuidePointer{{Function: "NextCopyFrom", Change: 0.3, Files: []string{"copyfromparse.c"}, Commits: []int{11}}}}, nil
	}}
	if err := e.Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	f := finding.FromBisection(s, finding.Report{})
	want := "profile-guided search: profile points at NextCopyFrom (copyfromparse.c, self share +30.0 points): 1 commit touches it: " + l.commits[11].Short()
	if !slices.Contains(f.Warnings, want) || len(f.Culprits) != 1 || f.Culprits[0].Commit.Hash != l.commits[11].Hash {
		t.Errorf("warnings %q, culprits %d; want %q and the culprit", f.Warnings, len(f.Culprits), want)
	}
	for _, w := range finding.FromBisection(l.run(t, stats.LowerIsBetter), finding.Report{}).Warnings {
		if strings.Contains(w, "profile") {
			t.Errorf("unguided finding says %q", w)
		}
	}
}

// TestExplainedCaveat: a bisection of a count-like metric (0.2% noise) that
// stopped once its culprit explained the endpoints' change says so in the report, with the evidence and the
// caveat; an exhaustive one does not.
func TestExplainedCaveat(t *testing.T) {
	for _, exhaustive := range []bool{false, true} {
		l := newLab(40, []int{3, 20}, map[int]float64{17: 0.3}, nil, nil)
		l.noise = 0.002
		in := bisect.Inputs{Repo: "test", Good: l.commits[0].Hash, Bad: l.commits[39].Hash, Scenario: "/x/copy-single.yaml",
			Metric: "elapsed", Direction: stats.LowerIsBetter, Thresholds: stats.Thresholds{Alpha: 0.05, MinEffect: 0.10, MaxSamples: 20}}
		s, err := bisect.NewState(in, l.commits, time.Date(2026, 1, 30, 2, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		s.Exhaustive = exhaustive
		if err := (&bisect.Engine{Builder: l, Measurer: l}).Run(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		md := notify.Markdown(finding.FromBisection(s, finding.Report{}), notify.Options{})
		shown := strings.Contains(md, "a regression and an improvement that cancel each other")
		if shown == exhaustive || (!exhaustive && !strings.Contains(md, "the culprits explain the endpoints' change")) {
			t.Errorf("exhaustive %v: caveat shown %v (explained %+v):\n%s", exhaustive, shown, s.Explained, md)
		}
	}
}

// curveLab measures the lab's history at every point alike.
type curveLab struct{ *lab }

func (l curveLab) MeasureAt(ctx context.Context, t bisect.Target, _ string) (float64, error) {
	return l.Measure(ctx, t)
}

// TestExplainedCaveatCurve: in a bisection of several points, each point
// whose search stopped when explained has its own line and caveat.
func TestExplainedCaveatCurve(t *testing.T) {
	l := newLab(40, []int{3, 20}, map[int]float64{17: 0.3}, nil, nil)
	l.noise = 0.002
	in := bisect.Inputs{Repo: "test", Good: l.commits[0].Hash, Bad: l.commits[39].Hash, Scenario: "/x/copy-single.yaml",
		Metric: "elapsed", Direction: stats.LowerIsBetter, Points: []string{"clients=1", "clients=2"},
		Thresholds: stats.Thresholds{Alpha: 0.05, MinEffect: 0.10, MaxSamples: 20}}
	s, err := bisect.NewCurveState(in, l.commits, time.Date(2026, 1, 30, 2, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if err := (&bisect.Engine{Builder: l, Measurer: curveLab{l}}).Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	md := notify.Markdown(finding.FromBisection(s, finding.Report{}), notify.Options{})
	explained := 0
	for _, sub := range s.Searches() {
		if sub.Explained != nil && sub.Explained.Confirmed {
			explained++
			if !strings.Contains(md, "at "+sub.Inputs.Point+": the culprits explain the endpoints' change") {
				t.Errorf("the report lacks %s's line", sub.Inputs.Point)
			}
		}
	}
	if explained == 0 {
		t.Fatalf("no point stopped when explained: %s", s.Summary)
	}
	if n := strings.Count(md, "cancel each other"); n != explained {
		t.Errorf("%d caveats for %d points stopped when explained", n, explained)
	}
}
