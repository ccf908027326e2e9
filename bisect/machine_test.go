package bisect

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// machineLab is a detLab on a machine of another speed: every value is
// scaled by speed, as a slower machine's would be.
type machineLab struct {
	*detLab
	speed float64
}

func (l *machineLab) Measure(ctx context.Context, t Target) (float64, error) {
	v, err := l.detLab.Measure(ctx, t)
	return v * l.speed, err
}

// TestMoveRestartsComparisonsInFlight stops a bisection on machine a at
// points in every phase and resumes it on machine b, 30% slower: the
// comparisons in flight restart on b (their samples superseded), decided
// verdicts stand, no later comparison uses a sample of a, and the culprits
// are those an uninterrupted run on one machine finds.
func TestMoveRestartsComparisonsInFlight(t *testing.T) {
	h := history(24, []int{4, 13}, map[int]float64{9: 0.3, 18: 0.2}, []int{15})
	in := Inputs{Repo: "test", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash, Metric: "elapsed",
		Direction: stats.LowerIsBetter, Thresholds: testThresholds}
	want, _ := NewState(in, h.Commits, time.Time{})
	ref := newDetLab(h, 0.03)
	if err := (&Engine{Builder: ref, Measurer: ref, Machine: "a"}).Run(context.Background(), want); err != nil || want.Outcome != OutcomeFound {
		t.Fatalf("reference run: %v %s", err, want.Summary)
	}
	culprits := func(s *State) (out []int) {
		for _, c := range s.Culprits {
			out = append(out, c.Candidates...)
		}
		slices.Sort(out)
		return out
	}
	phases := map[Phase]bool{}
	for _, stop := range []int{4, ref.actions / 4, ref.actions / 2, 3 * ref.actions / 4, ref.actions - 3} {
		s, _ := NewState(in, h.Commits, time.Time{})
		lab := newDetLab(h, 0.03)
		ctx, cancel := context.WithCancel(context.Background())
		lab.stopAt, lab.cancel = stop, cancel
		saver := &memSaver{}
		if err := (&Engine{Builder: lab, Measurer: lab, Saver: saver, Machine: "a"}).Run(ctx, s); !errors.Is(err, context.Canceled) {
			t.Fatalf("stop %d: Run returned %v", stop, err)
		}
		cancel()
		before, err := Decode(saver.data)
		if err != nil {
			t.Fatal(err)
		}
		phases[before.Phase] = true
		got, _ := Decode(saver.data)
		lab.stopAt = 0
		if err := (&Engine{Builder: lab, Measurer: &machineLab{lab, 1.3}, Saver: saver, Machine: "b"}).Run(context.Background(), got); err != nil {
			t.Fatalf("stop %d: resumed on b: %v", stop, err)
		}
		if m := got.Machines(); !slices.Equal(m, []string{"a", "b"}) || len(got.Moves) != 1 {
			t.Fatalf("stop %d: machines %v, %d moves; want a then b, one move", stop, m, len(got.Moves))
		}
		mv := got.Moves[0]
		if mv.At != before.SamplesTaken || mv.From != "a" || mv.To != "b" {
			t.Errorf("stop %d: move %+v, want from a to b at %d", stop, mv, before.SamplesTaken)
		}
		// The restarted comparisons are those in flight, and their samples
		// are the ones superseded.
		var open []int
		for k, p := range before.Pairs {
			if p.Verdict == VerdictPending && p.Target > 0 && !p.Dropped {
				open = append(open, k)
				if p.From != mv.Start {
					t.Errorf("stop %d: pair %d started at %d, superseded samples from %d", stop, k, p.From, mv.Start)
				}
			}
		}
		for i, ch := range before.Checks {
			if ch.Verdict == VerdictPending && ch.Target > 0 {
				if !slices.Equal(mv.Checks, []int{i}) || !slices.Equal(mv.CheckSamples[0].A, ch.A) || !slices.Equal(mv.CheckSamples[0].B, ch.B) {
					t.Errorf("stop %d: check %d in flight, move restarted %v with %+v", stop, i, mv.Checks, mv.CheckSamples)
				}
			}
		}
		if !slices.Equal(mv.Pairs, open) || len(open) > 1 {
			t.Errorf("stop %d: restarted pairs %v, in flight %v (at most one at a time)", stop, mv.Pairs, open)
		}
		if len(open)+len(mv.Checks) > 0 && !(mv.Start < mv.At) {
			t.Errorf("stop %d: comparisons restarted but no sample superseded: %+v", stop, mv)
		}
		for seq := range got.SamplesTaken + 2 {
			if got.Superseded(seq) != (seq >= mv.Start && seq < mv.At || seq >= got.SamplesTaken) {
				t.Errorf("stop %d: sample %d superseded %v", stop, seq, got.Superseded(seq))
			}
		}
		// Verdicts decided on a stand; everything judged later used b's
		// samples only.
		for k, p := range got.Pairs {
			if k < len(before.Pairs) && before.Pairs[k].Verdict != VerdictPending {
				if b := before.Pairs[k]; p.Verdict != b.Verdict || !reflect.DeepEqual(p.Result, b.Result) {
					t.Errorf("stop %d: pair %d was %s before the move, %s after", stop, k, b.Verdict, p.Verdict)
				}
				continue
			}
			if p.Result != nil && p.From < mv.At {
				t.Errorf("stop %d: pair %d judged after the move started at %d, before it (%d): it mixes machines", stop, k, p.From, mv.At)
			}
		}
		if sp := got.Spend(); sp.Total() != got.SamplesTaken || sp.Unsplit != 0 {
			t.Errorf("stop %d: spend %+v of %d samples: every sample, superseded ones included, belongs to a comparison", stop, sp, got.SamplesTaken)
		}
		if g, w := culprits(got), culprits(want); !slices.Equal(g, w) {
			t.Errorf("stop %d (%s): culprits %v on a then b, %v on one machine: %s", stop, before.Phase, g, w, got.Summary)
		}
	}
	for _, ph := range []Phase{PhaseEndpoints, PhaseSearch, PhaseCheck} {
		if !phases[ph] {
			t.Errorf("no stop in phase %s: move the stops (%d actions)", ph, ref.actions)
		}
	}
}

// TestArrive covers the cases without a move, and a state saved before
// machines were kept.
func TestArrive(t *testing.T) {
	h := history(8, nil, map[int]float64{5: 0.3}, nil)
	in := Inputs{Repo: "test", Good: h.Commits[0].Hash, Bad: h.Commits[7].Hash, Metric: "elapsed", Thresholds: testThresholds}
	s, _ := NewState(in, h.Commits, time.Time{})
	if s.Arrive("", time.Time{}) != nil || s.Arrive("a", time.Time{}) != nil || s.Machine != "a" {
		t.Fatalf("a first machine before any sample moved the bisection (machine %q)", s.Machine)
	}
	if s.Arrive("a", time.Time{}) != nil {
		t.Fatal("the same machine moved the bisection")
	}
	act := s.Next(time.Time{})
	s.Record(act, 100, 0)
	s.Machine = "" // as saved before machines were kept
	mv := s.Arrive("b", time.Time{})
	if mv == nil || mv.From != "" || mv.Start != 0 || mv.At != 1 || !slices.Equal(mv.Pairs, []int{0}) || s.Pairs[0].Target != 0 {
		t.Fatalf("a state with a sample of an unrecorded machine: move %+v, pair %+v; want the endpoints restarted", mv, s.Pairs[0])
	}
	if len(s.recent(s.Commits[act.Commit].Key, 0)) != 0 {
		t.Error("the superseded sample is still used")
	}
	s.Phase = PhaseDone
	if s.Arrive("c", time.Time{}) != nil || s.Machine != "b" {
		t.Error("a finished bisection moved")
	}
}
