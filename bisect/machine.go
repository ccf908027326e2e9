package bisect

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Move is a bisection's move from one machine to another, as when the
// machine running its job died and another took the job over: the
// comparisons in flight were restarted on the new machine. Their samples
// are kept (pair samples in State.Samples, check samples here) but
// superseded: no comparison uses them again. Decided verdicts stand.
type Move struct {
	// From is the machine the samples were taken on before, "" when it is
	// not known (a state saved before machines were kept).
	From string    `json:"from"`
	To   string    `json:"to"`
	Time time.Time `json:"time"`
	// Start and At bound the superseded samples on the bisection's sample
	// clock (State.SamplesTaken before each sample): those taken at Start
	// up to At-1 were taken for the comparisons restarted. Start equals At
	// when none was in flight.
	Start int `json:"start"`
	At    int `json:"at"`
	// Pairs and Checks are the restarted comparisons (indices into
	// State.Pairs and State.Checks).
	Pairs  []int `json:"pairs,omitempty"`
	Checks []int `json:"checks,omitempty"`
	// CheckSamples keeps the superseded samples of each restarted check,
	// in the order of Checks.
	CheckSamples []CheckSamples `json:"check_samples,omitempty"`
	// Seqs lists, in a bisection of several points, the superseded
	// samples on the bisection's clock, ascending: its searches sample in
	// turn, so theirs are not one stretch of it (Start equals At there).
	Seqs []int `json:"seqs,omitempty"`
}

// CheckSamples are the samples of a check's two sides.
type CheckSamples struct {
	A []float64 `json:"a"`
	B []float64 `json:"b"`
}

// Superseded reports whether the sample taken at clock seq (State.SamplesTaken
// just before it) was superseded by the move.
func (m Move) Superseded(seq int) bool {
	if seq >= m.Start && seq < m.At {
		return true
	}
	_, found := slices.BinarySearch(m.Seqs, seq)
	return found
}

// Arrive tells the bisection it continues on machine. The samples of one
// comparison must come from one machine, as speeds differ between
// machines; so when machine differs from the one that took the samples so
// far, every comparison in flight restarts (its samples superseded, see
// Move), every later comparison uses only samples taken on machine
// (MachineFrom), and decided verdicts stand. It returns the move, or nil
// when there was none: the same machine, no machine named, a finished
// bisection, or a first machine arriving before any sample.
//
// A bisection with samples but no machine recorded (saved before machines
// were kept) moves too: where those samples came from is not known.
//
// Like Next, Arrive is pure: the engine calls it when it starts (see
// Engine.Machine) and saves the state.
func (s *State) Arrive(machine string, now time.Time) *Move {
	if machine == "" || machine == s.Machine || s.Done() {
		return nil
	}
	if s.Curve != nil {
		return s.arriveCurve(machine, now)
	}
	if s.Machine == "" && s.SamplesTaken == 0 {
		s.Machine = machine
		return nil
	}
	mv := Move{From: s.Machine, To: machine, Time: now, Start: s.SamplesTaken, At: s.SamplesTaken}
	var names []string
	for k := range s.Pairs {
		p := &s.Pairs[k]
		if p.Verdict != VerdictPending || p.Target == 0 || p.Dropped {
			continue
		}
		// A pair's comparison takes every sample from its start on (one
		// comparison samples at a time), so its samples are the clocks
		// From..At-1.
		mv.Start = min(mv.Start, p.From)
		mv.Pairs = append(mv.Pairs, k)
		p.Target = 0 // judgePair starts it again, from the clock now
		names = append(names, s.Commits[p.Left].Short()+".."+s.Commits[p.Right].Short())
	}
	for i := range s.Checks {
		ch := &s.Checks[i]
		if ch.Verdict != VerdictPending || ch.Target == 0 {
			continue
		}
		// Checks are sampled one after another, each to its verdict, and
		// only checks are sampled then: the open one took the last samples.
		mv.Start = min(mv.Start, s.SamplesTaken-len(ch.A)-len(ch.B))
		mv.Checks = append(mv.Checks, i)
		mv.CheckSamples = append(mv.CheckSamples, CheckSamples{A: ch.A, B: ch.B})
		ch.A, ch.B, ch.Target = nil, nil, 0
		names = append(names, "check of "+s.Commits[ch.Right].Short())
	}
	if s.MachineFrom == nil {
		s.MachineFrom = map[string]int{}
	}
	for k, xs := range s.Samples {
		s.MachineFrom[k] = len(xs)
	}
	s.Moves = append(s.Moves, mv)
	s.Machine = machine
	from := mv.From
	if from == "" {
		from = "an unrecorded machine"
	}
	what := "no comparison was in flight"
	if len(names) > 0 {
		what = fmt.Sprintf("restarting %v here (%d samples superseded)", names, mv.At-mv.Start)
	}
	s.logf(now, "move", "", "moved from %s to %s after %d samples: %s; decided verdicts stand", from, machine, s.SamplesTaken, what)
	return &mv
}

// Machines lists the machines that took the bisection's samples, in the
// order they did: those it moved from, then the current one.
func (s *State) Machines() []string {
	var out []string
	add := func(m string) {
		if m == "" {
			return
		}
		for _, x := range out {
			if x == m {
				return
			}
		}
		out = append(out, m)
	}
	for _, mv := range s.Moves {
		add(mv.From)
	}
	add(s.Machine)
	return out
}

// Superseded reports whether the sample taken at clock seq was superseded
// by a move (see Move), or was never recorded: seq at or after
// SamplesTaken, a sample stored by a process that stopped before it saved
// the state, which a resumed bisection takes again.
func (s *State) Superseded(seq int) bool {
	if seq >= s.SamplesTaken {
		return true
	}
	for _, mv := range s.Moves {
		if mv.Superseded(seq) {
			return true
		}
	}
	return false
}

// Superseder marks, in a store of samples, the samples of bisection s that
// are superseded (State.Superseded): those of comparisons restarted on
// another machine, and those taken but never recorded in the state. The
// engine calls it when it starts, before it takes a sample, when its Saver
// implements it.
type Superseder interface {
	SupersedeSamples(ctx context.Context, s *State) error
}

// arriveCurve is Arrive for a bisection of several points: each search
// moves on its own (its comparison in flight restarts, see Arrive), and
// the State's move lists their superseded samples on the bisection's
// clock (Move.Seqs), which the searches' Clock maps their own clocks to.
func (s *State) arriveCurve(machine string, now time.Time) *Move {
	first := s.Machine == "" && s.SamplesTaken == 0
	mv := Move{From: s.Machine, To: machine, Time: now, Start: s.SamplesTaken, At: s.SamplesTaken}
	for _, sub := range s.Curve.Searches {
		sm := sub.Arrive(machine, now)
		if sm == nil {
			continue
		}
		for k := sm.Start; k < sm.At && k < len(sub.Clock); k++ {
			mv.Seqs = append(mv.Seqs, sub.Clock[k])
		}
	}
	s.Machine = machine
	s.drain()
	if first {
		return nil
	}
	slices.Sort(mv.Seqs)
	s.Moves = append(s.Moves, mv)
	from := mv.From
	if from == "" {
		from = "an unrecorded machine"
	}
	s.logf(now, "move", "", "moved from %s to %s after %d samples: %d samples of comparisons in flight superseded; decided verdicts stand",
		from, machine, s.SamplesTaken, len(mv.Seqs))
	return &mv
}
