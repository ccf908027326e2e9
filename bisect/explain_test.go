package bisect

import (
	"context"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// runExplain bisects h on a deterministic lab with noise sigma, exhaustive
// or not.
func runExplain(t *testing.T, h *SimHistory, sigma float64, exhaustive bool) (*State, *detLab) {
	t.Helper()
	lab := newDetLab(h, sigma)
	in := Inputs{Repo: "test", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash, Metric: "elapsed",
		Direction: stats.LowerIsBetter, Thresholds: testThresholds}
	s, err := NewState(in, h.Commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	s.Exhaustive = exhaustive
	if err := (&Engine{Builder: lab, Measurer: lab}).Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s, lab
}

func merged(s *State) int {
	n := 0
	for _, p := range s.Pairs {
		if p.Merged {
			n++
		}
	}
	return n
}

// TestStopWhenExplained: one culprit of 30% under 0.2% noise (a count-like metric) explains the
// endpoints' change, so the search stops without judging the ranges
// beside it, names it, and records the evidence; --exhaustive judges them
// and names the same culprit with more samples.
func TestStopWhenExplained(t *testing.T) {
	h := history(40, []int{3, 7, 20}, map[int]float64{17: 0.30}, nil)
	s, _ := runExplain(t, h, 0.002, false)
	if s.Outcome != OutcomeFound || len(s.Culprits) != 1 || s.Culprits[0].Last != 17 {
		t.Fatalf("outcome %s: %s\n%s", s.Outcome, s.Summary, eventLog(s))
	}
	ex := s.Explained
	if ex == nil {
		t.Fatalf("the search did not stop when explained:\n%s", eventLog(s))
	}
	if !ex.Checked || !ex.Confirmed || ex.Recheck == nil || len(ex.Ranges) == 0 || len(ex.Suspects) != 1 {
		t.Errorf("explanation %+v", ex)
	}
	if ex.Bound >= testThresholds.MinEffect || ex.Remainder.Lo > 1 || ex.Remainder.Hi < 1 {
		t.Errorf("remainder %s, bound %+.3f: not shown under the minimum effect", ex.Remainder, ex.Bound)
	}
	if n := merged(s); n != 0 {
		t.Errorf("%d merged pairs judged after the culprit explained the change", n)
	}
	if len(s.Unjudged) != 0 {
		t.Errorf("unjudged %v although the checks confirmed the explanation", s.Unjudged)
	}
	if !strings.Contains(s.Summary, "explain the endpoints' change") || !strings.Contains(eventLog(s), "explained") {
		t.Errorf("summary and log do not say why the search stopped: %s\n%s", s.Summary, eventLog(s))
	}
	full, _ := runExplain(t, h, 0.002, true)
	if full.Explained != nil || merged(full) == 0 {
		t.Errorf("exhaustive search stopped when explained (%d merged pairs)", merged(full))
	}
	if !reflect.DeepEqual(full.Culprits[0].Candidates, s.Culprits[0].Candidates) {
		t.Errorf("exhaustive search found %v, the explained one %v", full.Culprits[0].Candidates, s.Culprits[0].Candidates)
	}
	if full.SamplesTaken <= s.SamplesTaken {
		t.Errorf("exhaustive search took %d samples, the explained one %d", full.SamplesTaken, s.SamplesTaken)
	}
	t.Logf("explained: %d samples (%s); exhaustive: %d samples", s.SamplesTaken, ex.Remainder, full.SamplesTaken)
}

// TestNoStopWhileUnexplained: a second culprit of 10% beside the first
// leaves a remainder the minimum effect cannot rule out, so the search
// goes on and finds it.
func TestNoStopWhileUnexplained(t *testing.T) {
	h := history(40, []int{3, 7, 20}, map[int]float64{9: 0.30, 30: 0.10}, nil)
	s, _ := runExplain(t, h, 0.002, false)
	var got []int
	for _, c := range s.Culprits {
		got = append(got, c.Last)
	}
	if s.Outcome != OutcomeFound || !slices.Equal(got, []int{9, 30}) {
		t.Fatalf("culprits %v (%s), want 9 and 30\n%s", got, s.Summary, eventLog(s))
	}
	if s.Explained != nil && s.Explained.Bound < testThresholds.MinEffect && len(s.Explained.Suspects) < 2 {
		t.Errorf("the search stopped with one suspect although the rest was %s", s.Explained.Remainder)
	}
}

// TestExplanationBound checks the decision's arithmetic: intervals combine
// in log space, in quadrature, the remainder's upper end against the
// minimum effect, in the metric's direction.
func TestExplanationBound(t *testing.T) {
	s := &State{Inputs: Inputs{Direction: stats.LowerIsBetter, Thresholds: testThresholds}}
	r := func(ratio, lo, hi float64) *Result { return &Result{Ratio: ratio, Lo: lo, Hi: hi} }
	tests := []struct {
		name      string
		endpoints *Result
		parts     []*Result
		explained bool
	}{
		{"one culprit, narrow", r(1.30, 1.28, 1.32), []*Result{r(1.30, 1.28, 1.32)}, true},
		{"one culprit, wide intervals", r(1.30, 1.15, 1.45), []*Result{r(1.30, 1.15, 1.45)}, false},
		{"a 10% rest", r(1.43, 1.41, 1.45), []*Result{r(1.30, 1.28, 1.32)}, false},
		{"two culprits", r(1.43, 1.41, 1.45), []*Result{r(1.30, 1.29, 1.31), r(1.10, 1.09, 1.11)}, true},
		{"no interval", r(1.30, 0, 0), []*Result{r(1.30, 1.28, 1.32)}, false},
	}
	for _, tt := range tests {
		ex, ok := s.explanation(tt.endpoints, tt.parts)
		if got := ok && ex.Bound < testThresholds.MinEffect; got != tt.explained {
			t.Errorf("%s: explained %v (%+v), want %v", tt.name, got, ex, tt.explained)
		}
	}
	ex, _ := s.explanation(r(1.30, 1.28, 1.32), []*Result{r(1.30, 1.28, 1.32)})
	up := math.Log(1.32/1.30)*math.Log(1.32/1.30) + math.Log(1.30/1.28)*math.Log(1.30/1.28)
	if want := math.Exp(math.Sqrt(up)) - 1; math.Abs(ex.Bound-want) > 1e-12 || math.Abs(ex.Remainder.Ratio-1) > 1e-12 {
		t.Errorf("bound %v, remainder %v; want %v and 1", ex.Bound, ex.Remainder.Ratio, want)
	}
	// Higher is better: a remainder that is a drop is the change for the
	// worse.
	s.Inputs.Direction = stats.HigherIsBetter
	if ex, _ := s.explanation(r(0.70, 0.69, 0.71), []*Result{r(0.77, 0.76, 0.78)}); ex.Bound < 0.05 {
		t.Errorf("higher is better: a rest of %s bounded at %+.3f", ex.Remainder, ex.Bound)
	}
}

// TestExplainedResumesEverywhere: a bisection that stops when explained,
// interrupted after each of its builds and samples and resumed from its
// saved state, makes the same decision with the same samples.
func TestExplainedResumesEverywhere(t *testing.T) {
	h := history(24, []int{4, 13}, map[int]float64{9: 0.3}, []int{15})
	want, ref := runExplain(t, h, 0.002, false)
	if want.Explained == nil {
		t.Fatalf("reference run did not stop when explained:\n%s", eventLog(want))
	}
	for stop := 1; stop < ref.actions; stop++ {
		lab := newDetLab(h, 0.002)
		got := interruptAndResume(t, want, h, lab, lab, stop)
		if !reflect.DeepEqual(got.Explained, want.Explained) || !reflect.DeepEqual(got.Culprits, want.Culprits) ||
			!reflect.DeepEqual(got.Samples, want.Samples) || got.SamplesTaken != want.SamplesTaken {
			t.Fatalf("stop %d: resumed bisection differs: %s (%d samples, explained %+v) vs %s (%d samples)",
				stop, got.Summary, got.SamplesTaken, got.Explained, want.Summary, want.SamplesTaken)
		}
		if !slices.Equal(lab.measured, ref.measured) {
			t.Fatalf("stop %d: a sample was lost or repeated", stop)
		}
	}
}

// TestExplainedSimulation: at 0.2% noise (a near-deterministic metric) a
// 10% culprit explains the endpoints' change in nearly every seeded
// bisection, so the search stops there, names it exactly and takes fewer
// samples than the exhaustive search of the same histories, which never
// stops so.
func TestExplainedSimulation(t *testing.T) {
	cfg := SimConfig{Commits: 200, Culprits: 1, Effect: 0.10, Sigma: 0.002, BrokenStretches: 2}
	var stopped, full, explained int
	for r := range 8 {
		for _, ex := range []bool{false, true} {
			cfg.Exhaustive = ex
			run, s, _, err := simulate(cfg, 30*1_000_003+uint64(r))
			if err != nil {
				t.Fatal(err)
			}
			if !run.Exact || run.WrongBlames > 0 {
				t.Errorf("seed %d, exhaustive %v: not exact (%s)", r, ex, s.Summary)
			}
			switch {
			case ex && s.Explained != nil:
				t.Errorf("seed %d: the exhaustive search stopped when explained", r)
			case !ex && s.Explained != nil && s.Explained.Confirmed:
				explained++
			}
			if ex {
				full += run.Samples
			} else {
				stopped += run.Samples
			}
		}
	}
	if explained < 6 {
		t.Errorf("the culprit explained the change in %d of 8 bisections", explained)
	}
	if stopped >= full {
		t.Errorf("stopping when explained took %d samples, the exhaustive search %d", stopped, full)
	}
	t.Logf("8 bisections, %d stopped when explained: %d samples, %d exhaustive", explained, stopped, full)
}
