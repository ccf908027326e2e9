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

// curveMachineLab is detCurveLab on a machine speed times slower.
type curveMachineLab struct {
	*detCurveLab
	speed float64
}

func (l *curveMachineLab) MeasureAt(ctx context.Context, t Target, point string) (float64, error) {
	v, err := l.detCurveLab.MeasureAt(ctx, t, point)
	return v * l.speed, err
}

// TestCurveMoveRestartsComparisonsInFlight: a bisection of several points
// stopped on machine a and resumed on b, 30% slower, restarts the
// comparison in flight of every search, and its move lists exactly those
// searches' superseded samples on the bisection's clock; the culprit is
// the same as on one machine.
func TestCurveMoveRestartsComparisonsInFlight(t *testing.T) {
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
	if err := (&Engine{Builder: ref, Measurer: ref, Machine: "a"}).Run(context.Background(), want); err != nil || len(want.Culprits) != 1 {
		t.Fatalf("reference run: %v %s", err, want.Summary)
	}
	moved := 0
	for _, stop := range []int{3, ref.actions / 4, ref.actions / 2, 3 * ref.actions / 4, ref.actions - 3} {
		lab := newDetCurveLab(h, points, effects)
		s, err := NewCurveState(in, h.Commits, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
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
		got, _ := Decode(saver.data)
		lab.stopAt = 0
		if err := (&Engine{Builder: lab, Measurer: &curveMachineLab{lab, 1.3}, Saver: saver, Machine: "b"}).Run(context.Background(), got); err != nil {
			t.Fatalf("stop %d: resumed on b: %v", stop, err)
		}
		if m := got.Machines(); !slices.Equal(m, []string{"a", "b"}) || len(got.Moves) != 1 {
			t.Fatalf("stop %d: machines %v, %d moves; want a then b, one move", stop, m, len(got.Moves))
		}
		var wantSeqs []int
		for p, sub := range got.Curve.Searches {
			open := false
			b := before.Curve.Searches[p]
			for _, pr := range b.Pairs {
				open = open || pr.Verdict == VerdictPending && pr.Target > 0 && !pr.Dropped
			}
			for _, ch := range b.Checks {
				open = open || ch.Verdict == VerdictPending && ch.Target > 0
			}
			if b.Done() {
				continue
			}
			if sub.Machine != "b" || len(sub.Moves) != 1 {
				t.Fatalf("stop %d, %s: search on %q with %d moves", stop, points[p], sub.Machine, len(sub.Moves))
			}
			mv := sub.Moves[0]
			if open != (mv.Start < mv.At) {
				t.Errorf("stop %d, %s: in flight %v, but superseded %d..%d", stop, points[p], open, mv.Start, mv.At)
			}
			for k := mv.Start; k < mv.At; k++ {
				wantSeqs = append(wantSeqs, sub.Clock[k])
			}
		}
		slices.Sort(wantSeqs)
		if mv := got.Moves[0]; !slices.Equal(mv.Seqs, wantSeqs) {
			t.Errorf("stop %d: the move supersedes %v, the searches %v", stop, mv.Seqs, wantSeqs)
		}
		for _, q := range wantSeqs {
			if q >= before.SamplesTaken || !got.Superseded(q) {
				t.Errorf("stop %d: sample %d of a restarted comparison: superseded %v (of %d taken before)", stop, q, got.Superseded(q), before.SamplesTaken)
			}
		}
		moved += len(wantSeqs)
		if len(got.Culprits) != 1 || got.Culprits[0].Last != want.Culprits[0].Last {
			t.Errorf("stop %d: %s, want %s", stop, got.Summary, want.Summary)
		}
	}
	if moved == 0 {
		t.Fatal("no stop had a comparison in flight: the test tested nothing")
	}
}
