package bisect

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// crashLab is a detLab whose builds of some commits cannot be measured:
// from the given attempt on (1: the first sample, 3: the third), every
// sample of the commit fails like a server that crashes.
type crashLab struct {
	*detLab
	crashFrom map[int]int // commit index -> first failing attempt
	attempts  map[int]int // samples asked of each commit
	// interrupted counts failures the context was cancelled during: the
	// engine records nothing of them and asks again after a resume.
	interrupted int
}

func newCrashLab(h *SimHistory, sigma float64, crashFrom map[int]int) *crashLab {
	return &crashLab{detLab: newDetLab(h, sigma), crashFrom: crashFrom, attempts: map[int]int{}}
}

func (l *crashLab) Measure(ctx context.Context, t Target) (float64, error) {
	i := t.(int)
	l.attempts[i]++
	if from, ok := l.crashFrom[i]; ok && l.attempts[i] >= from {
		l.tick()
		if l.stopAt > 0 && l.actions >= l.stopAt {
			l.interrupted++
		}
		return 0, &UnmeasurableError{Reason: "the server crashed (start): PANIC:  injected", ServerLog: "LOG:  starting\nPANIC:  injected"}
	}
	return l.detLab.Measure(ctx, t)
}

func TestUnmeasurableSkipped(t *testing.T) {
	tests := []struct {
		name      string
		h         *SimHistory
		crashFrom map[int]int
		// culprits are the expected candidate lists, worst first.
		culprits [][]int
	}{
		// 8 is the first midpoint of 0..16; the culprit next to it becomes
		// a range of the two.
		{"crash at start next to the culprit", history(17, nil, map[int]float64{9: 0.25}, nil), map[int]int{8: 1}, [][]int{{8, 9}}},
		{"crash at start far from the culprit", history(17, nil, map[int]float64{3: 0.25}, nil), map[int]int{8: 1}, [][]int{{3}}},
		{"crash at start next to a broken commit", history(17, nil, map[int]float64{9: 0.25}, []int{7}), map[int]int{8: 1}, [][]int{{7, 8, 9}}},
		// Failing on a later sample, after the search split around it.
		{"crash on the third sample", history(17, nil, map[int]float64{9: 0.25}, nil), map[int]int{8: 3}, [][]int{{8, 9}}},
		{"crash on the tenth sample", history(17, nil, map[int]float64{9: 0.25}, nil), map[int]int{8: 10}, [][]int{{8, 9}}},
		// After the search split 8..16 further: that work is dropped.
		{"crash after splits beyond it", history(17, nil, map[int]float64{9: 0.25}, nil), map[int]int{8: 13}, [][]int{{8, 9}}},
		// In the check of the suspect 8..9: nothing is blamed.
		{"crash during its check", history(17, nil, map[int]float64{9: 0.25}, nil), map[int]int{8: 18}, nil}, // the search asks 15 samples of 8, the check 5
		{"two crashing commits", history(33, nil, map[int]float64{20: 0.25}, nil), map[int]int{16: 1, 19: 1}, [][]int{{19, 20}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lab := newCrashLab(tt.h, 0.03, tt.crashFrom)
			s := runHistory(t, tt.h, lab, lab, stats.LowerIsBetter)
			if want := map[bool]Outcome{true: OutcomeFound, false: OutcomeUnresolved}[tt.culprits != nil]; s.Outcome != want {
				t.Fatalf("outcome %s (%s)\n%s", s.Outcome, s.Summary, eventLog(s))
			}
			var got [][]int
			for _, c := range s.Culprits {
				got = append(got, c.Candidates)
			}
			if !reflect.DeepEqual(got, tt.culprits) {
				t.Errorf("culprits %v, want %v\n%s", got, tt.culprits, eventLog(s))
			}
			for i, from := range tt.crashFrom {
				b := s.Builds[tt.h.Commits[i].Key]
				if lab.attempts[i] == 0 {
					continue // the search never needed it
				}
				if b == nil || !b.Unmeasurable || b.Broken || !strings.Contains(b.ServerLog, "PANIC") {
					t.Errorf("commit %d: build record %+v, want it unmeasurable with its server log", i, b)
				}
				if lab.attempts[i] != from {
					t.Errorf("commit %d: %d samples asked, want %d (never again after it failed)", i, lab.attempts[i], from)
				}
			}
			for _, c := range s.Culprits {
				if len(c.Candidates) > 1 && !strings.Contains(c.Note, "measured") {
					t.Errorf("range culprit %v: note %q does not say its commits could not be measured", c.Candidates, c.Note)
				}
			}
			if tt.culprits == nil {
				if len(s.Unconfirmed) == 0 || !strings.Contains(s.Unconfirmed[0].Note, "could not be measured") {
					t.Errorf("unconfirmed %+v: want the suspect whose check could not be measured\n%s", s.Unconfirmed, eventLog(s))
				}
				return
			}
		})
	}
}

// TestUnmeasurableResume interrupts a bisection with a crashing commit
// after every build and sample, and checks that the resumed one ends like
// an uninterrupted one without asking the crashing commit for another
// sample: the skip is part of the saved state.
func TestUnmeasurableResume(t *testing.T) {
	h := history(17, nil, map[int]float64{9: 0.25}, nil)
	crash := map[int]int{8: 1}
	ref := newCrashLab(h, 0.03, crash)
	want := runHistory(t, h, ref, ref, stats.LowerIsBetter)
	if want.Outcome != OutcomeFound || ref.attempts[8] != 1 {
		t.Fatalf("reference run: %s, commit 8 asked %d times", want.Summary, ref.attempts[8])
	}
	for stop := 1; stop < ref.actions; stop++ {
		lab := newCrashLab(h, 0.03, crash)
		got := interruptAndResume(t, want, h, lab, lab.detLab, stop)
		if !reflect.DeepEqual(got.Culprits, want.Culprits) || !reflect.DeepEqual(got.Samples, want.Samples) || got.SamplesTaken != want.SamplesTaken {
			t.Fatalf("stop %d: resumed bisection differs: %s (%d samples) vs %s (%d samples)", stop, got.Summary, got.SamplesTaken, want.Summary, want.SamplesTaken)
		}
		if lab.attempts[8] != 1+lab.interrupted {
			t.Fatalf("stop %d: the crashing commit was asked %d times, want once (plus %d interrupted)", stop, lab.attempts[8], lab.interrupted)
		}
	}
}

// TestUnmeasurableEndpoints: a scenario that fails on both endpoints is
// the scenario's fault, an error that records nothing; one endpoint that
// cannot be measured ends the bisection like one that does not build.
func TestUnmeasurableEndpoints(t *testing.T) {
	h := history(10, nil, map[int]float64{5: 0.2}, nil)
	in := Inputs{Repo: "test", Good: h.Commits[0].Hash, Bad: h.Commits[9].Hash, Metric: "elapsed", Thresholds: testThresholds}

	t.Run("both", func(t *testing.T) {
		lab := newCrashLab(h, 0.03, map[int]int{0: 1, 9: 1})
		s, _ := NewState(in, h.Commits, time.Time{})
		err := (&Engine{Builder: lab, Measurer: lab}).Run(context.Background(), s)
		var se *ScenarioError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "scenario") || !strings.Contains(err.Error(), "PANIC") {
			t.Fatalf("Run returned %v, want a *ScenarioError with the server log", err)
		}
		for key, b := range s.Builds {
			if b.Unmeasurable {
				t.Errorf("key %s recorded unmeasurable: a fixed scenario must be able to measure it", key)
			}
		}
		if s.Done() {
			t.Errorf("state is done (%s): a run with a fixed scenario could not go on", s.Outcome)
		}
	})
	for _, end := range []int{0, 9} {
		t.Run("only "+h.Commits[end].Short(), func(t *testing.T) {
			lab := newCrashLab(h, 0.03, map[int]int{end: 1})
			s, _ := NewState(in, h.Commits, time.Time{})
			if err := (&Engine{Builder: lab, Measurer: lab}).Run(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			if s.Outcome != OutcomeBroken || !strings.Contains(s.Summary, "cannot be measured") || !strings.Contains(s.Summary, h.Commits[end].Short()) {
				t.Errorf("outcome %s: %s", s.Outcome, s.Summary)
			}
			if b := s.Builds[h.Commits[end].Key]; b == nil || !b.Unmeasurable || !strings.Contains(b.ServerLog, "PANIC:  injected") {
				t.Errorf("endpoint build record %+v, want it unmeasurable with its server log", b)
			}
		})
	}
	t.Run("endpoint later in the search", func(t *testing.T) {
		// The bad commit measures at first, then crashes: the bisection
		// ends as broken, blaming nothing.
		lab := newCrashLab(h, 0.03, map[int]int{9: 8})
		s, _ := NewState(in, h.Commits, time.Time{})
		if err := (&Engine{Builder: lab, Measurer: lab}).Run(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if s.Outcome != OutcomeBroken || len(s.Culprits) != 0 || slices.ContainsFunc(s.Checks, func(c Check) bool { return c.Verdict == VerdictRegression }) {
			t.Errorf("outcome %s, culprits %v: %s", s.Outcome, s.Culprits, s.Summary)
		}
	})
}
