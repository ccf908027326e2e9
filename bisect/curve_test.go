package bisect

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

var curveTable = flag.String("curvetable", "", "run the multi-point simulation table and write it as Markdown to this file")

// detCurveLab measures a history at several points deterministically: the
// j-th sample of a build at a point is the same in every run.
type detCurveLab struct {
	*detLab
	points []string
	levels [][]float64
	taken  map[string]int
}

// newDetCurveLab makes a lab of h at points, culprit c's effect at point p
// being effects[c][p].
func newDetCurveLab(h *SimHistory, points []string, effects map[int][]float64) *detCurveLab {
	l := &detCurveLab{detLab: newDetLab(h, 0.03), points: points, taken: map[string]int{}}
	for p := range points {
		level := 1.0
		var lv []float64
		for i := range h.Commits {
			if e, ok := effects[i]; ok {
				level *= 1 + e[p]
			}
			lv = append(lv, level)
		}
		l.levels = append(l.levels, lv)
	}
	return l
}

func (l *detCurveLab) MeasureAt(_ context.Context, t Target, point string) (float64, error) {
	p := slices.Index(l.points, point)
	if p < 0 {
		return 0, fmt.Errorf("no point %s", point)
	}
	i := t.(int)
	k := fmt.Sprintf("%s/%d", point, i)
	j := l.taken[k]
	l.taken[k]++
	f := fnv.New64a()
	fmt.Fprintf(f, "%s/%d", k, j)
	rng := rand.New(rand.NewPCG(f.Sum64(), 7))
	l.measured = append(l.measured, k)
	l.tick()
	return 100 * l.levels[p][i] * (1 + l.sigma*rng.NormFloat64()), nil
}

var curvePoints = []string{"clients=1", "clients=4", "clients=16"}

// curveHistory: 24 commits; commit 9 slows clients=4 and clients=16 by
// 30%, commit 18 slows clients=16 only by 25%; clients=1 sees neither.
func curveHistory() (*SimHistory, map[int][]float64) {
	effects := map[int][]float64{9: {0, 0.3, 0.3}, 18: {0, 0, 0.25}}
	h := history(24, []int{4, 13}, map[int]float64{9: 0.3, 18: 0.25}, []int{15})
	return h, effects
}

func curveInputs(h *SimHistory) Inputs {
	return Inputs{Repo: "test", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash, Metric: "elapsed",
		Direction: stats.LowerIsBetter, Thresholds: testThresholds, Points: curvePoints}
}

func runCurve(t *testing.T, h *SimHistory, lab *detCurveLab) *State {
	t.Helper()
	s, err := NewCurveState(curveInputs(h), h.Commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Engine{Builder: lab, Measurer: lab}).Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCurveBisect: one bisection of three points names each point's
// culprits, builds every commit once for all points, measures each
// culprit at the points where it was not found, and reports a culprit of
// several points once.
func TestCurveBisect(t *testing.T) {
	h, effects := curveHistory()
	lab := newDetCurveLab(h, curvePoints, effects)
	s := runCurve(t, h, lab)
	if s.Outcome != OutcomeFound {
		t.Fatalf("outcome %s: %s", s.Outcome, s.Summary)
	}
	want := [][]int{nil, {9}, {9, 18}}
	for p, sub := range s.Curve.Searches {
		var got []int
		for _, c := range sub.Culprits {
			got = append(got, c.Candidates...)
		}
		slices.Sort(got)
		if !slices.Equal(got, want[p]) {
			t.Errorf("%s: culprits %v, want %v (%s)", sub.Inputs.Point, got, want[p], sub.Summary)
		}
	}
	if p0 := s.Curve.Searches[0]; p0.Outcome != OutcomeNoRegression {
		t.Errorf("clients=1: %s, want no regression", p0.Outcome)
	}
	for hash, n := range lab.builds {
		if n > 1 {
			t.Errorf("commit %s built %d times", hash, n)
		}
	}
	if len(s.Culprits) != 2 {
		t.Fatalf("%d culprits at the top, want 2 (one per commit): %+v", len(s.Culprits), s.Culprits)
	}
	cc := s.CurveCulprits()
	if len(cc) != 2 || cc[0].Last != 9 && cc[0].Last != 18 {
		t.Fatalf("curve culprits %+v", cc)
	}
	for _, c := range cc {
		for p := range curvePoints {
			found, check := c.At[p] != nil, s.CurveCheck(p, c.Range)
			if found == (check != nil) {
				t.Errorf("culprit %d at %s: found %v, curve check %v: want exactly one", c.Last, curvePoints[p], found, check != nil)
			}
			if check != nil && check.Verdict == VerdictRegression {
				t.Errorf("culprit %d at %s: the curve check shows a regression where there is none: %s", c.Last, curvePoints[p], check.Result)
			}
		}
	}
	sp := s.Spend()
	if sp.Total() != s.SamplesTaken || sp.Unsplit != 0 || sp.Curve == 0 {
		t.Errorf("spend %s, %d samples taken", sp, s.SamplesTaken)
	}
	// Every search event is in the one log, marked with its point.
	var marked int
	for _, e := range s.Events {
		if strings.HasPrefix(e.Message, "[clients=") {
			marked++
		}
	}
	if marked == 0 {
		t.Error("no event of a search in the log")
	}
	for _, sub := range s.Curve.Searches {
		if len(sub.Events) != 0 {
			t.Errorf("%s keeps %d events of its own", sub.Inputs.Point, len(sub.Events))
		}
	}
	// Samples go round the points: no point is more than one sample ahead
	// of another while both search.
	t.Logf("%s; %s; %d builds", s.Summary, sp, s.BuildsDone)
}

// TestCurveResumeEverywhere interrupts a bisection of three points at
// every step and resumes it from its saved JSON: it ends exactly as the
// uninterrupted one, with no sample lost or repeated and no build counted
// twice (a resumed process asks the builder again: a cache hit).
func TestCurveResumeEverywhere(t *testing.T) {
	// Two points, a culprit at one: a search that finds it, one that
	// stops at its endpoints, and a curve check; small, so that every
	// step can be tried.
	points := curvePoints[:2]
	effects := map[int][]float64{7: {0, 0.3}}
	h := history(12, []int{4}, map[int]float64{7: 0.3}, []int{9})
	in := curveInputs(h)
	in.Points = points
	ref := newDetCurveLab(h, points, effects)
	want, err := NewCurveState(in, h.Commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Engine{Builder: ref, Measurer: ref}).Run(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	if len(want.Culprits) != 1 || want.Culprits[0].Last != 7 || want.Spend().Curve == 0 {
		t.Fatalf("reference run: %s", want.Summary)
	}
	total := ref.actions
	for stop := 1; stop < total; stop++ {
		lab := newDetCurveLab(h, points, effects)
		s, err := NewCurveState(in, h.Commits, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		lab.stopAt, lab.cancel = stop, cancel
		saver := &memSaver{}
		err = (&Engine{Builder: lab, Measurer: lab, Saver: saver}).Run(ctx, s)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stop %d: Run returned %v", stop, err)
		}
		got, err := Decode(saver.data)
		if err != nil {
			t.Fatalf("stop %d: %v", stop, err)
		}
		lab.stopAt = 0
		if err := (&Engine{Builder: lab, Measurer: lab, Saver: saver}).Run(context.Background(), got); err != nil {
			t.Fatalf("stop %d: resumed: %v", stop, err)
		}
		for p := range points {
			g, w := got.Curve.Searches[p], want.Curve.Searches[p]
			if !reflect.DeepEqual(g.Samples, w.Samples) || !reflect.DeepEqual(g.Culprits, w.Culprits) || !reflect.DeepEqual(g.Checks, w.Checks) {
				t.Fatalf("stop %d, %s: resumed search differs: %s vs %s", stop, points[p], g.Summary, w.Summary)
			}
		}
		if !slices.Equal(lab.measured, ref.measured) || got.SamplesTaken != want.SamplesTaken || got.BuildsDone != want.BuildsDone {
			t.Fatalf("stop %d: %d measurements, %d samples, %d builds; want %d, %d, %d", stop, len(lab.measured), got.SamplesTaken, got.BuildsDone,
				len(ref.measured), want.SamplesTaken, want.BuildsDone)
		}
		if !reflect.DeepEqual(got.Culprits, want.Culprits) || got.Summary != want.Summary {
			t.Fatalf("stop %d: %s, want %s", stop, got.Summary, want.Summary)
		}
	}
	t.Logf("interrupted and resumed at each of %d steps", total-1)
}

// TestCurveSavedOnce: the searches are saved without the commits and
// builds they share, and decode linked to the State's.
func TestCurveSavedOnce(t *testing.T) {
	h, _ := curveHistory()
	s, err := NewCurveState(curveInputs(h), h.Commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), h.Commits[5].Hash); n != 1 {
		t.Errorf("commit hash saved %d times, want once", n)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	got.Builds["x"] = &BuildResult{}
	for _, sub := range got.Curve.Searches {
		if len(sub.Commits) != len(h.Commits) || sub.Builds["x"] == nil {
			t.Fatalf("%s is not linked to the state's commits and builds", sub.Inputs.Point)
		}
	}
	// A single point's state has no curve and keeps its ID.
	one := curveInputs(h)
	one.Points, one.Point = nil, "clients=1"
	single, _ := NewState(one, h.Commits, time.Time{})
	data, _ = json.Marshal(single)
	if strings.Contains(string(data), `"curve"`) || strings.Contains(string(data), `"points":["`) {
		t.Errorf("a single-point state saves curve fields: %s", data[:200])
	}
	if _, err := NewCurveState(Inputs{Points: []string{"a=1"}}, h.Commits, time.Time{}); err == nil {
		t.Error("a curve of one point was accepted")
	}
	if _, err := NewCurveState(Inputs{Points: []string{"a=1", "a=1"}}, h.Commits, time.Time{}); err == nil {
		t.Error("a point listed twice was accepted")
	}
}

// TestCurveNeedsPointMeasurer: a Measurer of one point cannot run a curve.
func TestCurveNeedsPointMeasurer(t *testing.T) {
	h, _ := curveHistory()
	s, _ := NewCurveState(curveInputs(h), h.Commits, time.Time{})
	lab := newDetLab(h, 0.03)
	err := (&Engine{Builder: lab, Measurer: struct{ Measurer }{lab}}).Run(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "measures one point only") {
		t.Fatalf("Run: %v", err)
	}
}

// TestCurveSimulationSmoke runs a few simulated curves: the one bisection
// blames no wrong commit and builds no more than separate ones.
func TestCurveSimulationSmoke(t *testing.T) {
	cfg := SimCurveConfig{SimConfig: SimConfig{Commits: 200, Culprits: 1, BrokenStretches: 1}, Effects: []float64{0, 0.15, 0.3}}
	row, err := SimulateCurveRow(cfg, 8, 1, runtime.NumCPU())
	if err != nil {
		t.Fatal(err)
	}
	if row.WrongRate > 0 || row.ExactRate < 0.5 {
		t.Errorf("exact %.0f%%, wrong blame %.0f%%", 100*row.ExactRate, 100*row.WrongRate)
	}
	if row.Builds > row.SepBuilds {
		t.Errorf("one bisection built %.1f, separate ones %.1f", row.Builds, row.SepBuilds)
	}
	t.Logf("\n%s", FormatCurveTable([]SimCurveRow{row}))
}

// curveRows are the families of docs/bisect.md's multi-point table.
func curveRows() []SimCurveConfig {
	return []SimCurveConfig{
		{SimConfig: SimConfig{Commits: 1000, Culprits: 1, BrokenStretches: 3}, Effects: []float64{0.10, 0.10, 0.10}},
		{SimConfig: SimConfig{Commits: 1000, Culprits: 1, BrokenStretches: 3}, Effects: []float64{0, 0.10, 0.20}},
		{SimConfig: SimConfig{Commits: 1000, Culprits: 1, BrokenStretches: 3}, Effects: []float64{0, 0, 0.10}},
		{SimConfig: SimConfig{Commits: 1000, Culprits: 2, BrokenStretches: 3}, Effects: []float64{0, 0.10, 0.20}},
		{SimConfig: SimConfig{Commits: 1000, Culprits: 0, BrokenStretches: 3}, Effects: []float64{0, 0, 0}},
		{SimConfig: SimConfig{Commits: 1000, Culprits: 1, BrokenStretches: 3, Drift: Drift{Walk: 0.05, Bursts: 2}}, Effects: []float64{0, 0.10, 0.20}},
	}
}

// TestCurveTable writes the multi-point table:
//
//	go test ./bisect -run TestCurveTable -curvetable /tmp/curve.md -simruns 200 -timeout 2h
func TestCurveTable(t *testing.T) {
	if *curveTable == "" {
		t.Skip("run with -curvetable FILE to write the multi-point table")
	}
	var rows []SimCurveRow
	for i, cfg := range curveRows() {
		row, err := SimulateCurveRow(cfg, *simRuns, uint64(i+1), runtime.NumCPU())
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
		t.Logf("\n%s", FormatCurveTable(rows[len(rows)-1:]))
	}
	if err := os.WriteFile(*curveTable, []byte(FormatCurveTable(rows)), 0o644); err != nil {
		t.Fatal(err)
	}
}
