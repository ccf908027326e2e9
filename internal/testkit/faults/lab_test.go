package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
)

// history is the simulated range every process of a test agrees on: it
// depends only on seed.
func history(seed uint64, commits int) *bisect.SimHistory {
	return bisect.NewSimHistory(bisect.SimConfig{Commits: commits, Culprits: 2, Effect: 0.25, BrokenStretches: 1},
		rand.New(rand.NewPCG(seed, 7)))
}

func inputs(h *bisect.SimHistory, metric string) bisect.Inputs {
	return bisect.Inputs{Repo: "sim", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash,
		Scenario: "sim", Metric: metric, Direction: stats.LowerIsBetter}
}

// fixedNow keeps event times out of the comparison of a resumed state
// with an uninterrupted one.
func fixedNow() time.Time { return time.Unix(1_700_000_000, 0).UTC() }

// lab builds and measures a SimHistory. A measurement depends only on the
// commit and on the state's sample clock (SamplesTaken), never on the
// process: a sample lost to a kill before it was saved is measured again
// with the same value, so a resumed bisection must end exactly like an
// uninterrupted one. Every measurement is appended to the journal with
// its process and its start and end, so a test can tell whether two
// processes measured at the same time.
type lab struct {
	h       *bisect.SimHistory
	idx     map[string]int
	seed    uint64
	s       *bisect.State
	journal *os.File // nil: none
	delay   time.Duration
}

func newLab(h *bisect.SimHistory, seed uint64, s *bisect.State, journal *os.File, delay time.Duration) *lab {
	l := &lab{h: h, idx: map[string]int{}, seed: seed, s: s, journal: journal, delay: delay}
	for i, c := range h.Commits {
		l.idx[c.Hash] = i
	}
	return l
}

func (l *lab) wait(ctx context.Context) error {
	if l.delay <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(l.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (l *lab) Build(ctx context.Context, hash string) (bisect.Target, error) {
	i, ok := l.idx[hash]
	if !ok {
		return nil, fmt.Errorf("unknown commit %s", hash)
	}
	if err := l.wait(ctx); err != nil {
		return nil, err
	}
	if l.h.Broken[i] {
		return nil, &bisect.BrokenError{Reason: "simulated compile error"}
	}
	return i, nil
}

func (l *lab) Measure(ctx context.Context, t bisect.Target) (float64, error) {
	i := t.(int)
	start := time.Now()
	if err := l.wait(ctx); err != nil {
		return 0, err
	}
	r := rand.New(rand.NewPCG(l.seed^uint64(i+1)*0x9e3779b97f4a7c15, uint64(l.s.SamplesTaken)))
	v := 100 * l.h.Level[i] * (1 + 0.03*r.NormFloat64())
	if l.journal != nil {
		fmt.Fprintf(l.journal, "%d %d %d\n", os.Getpid(), start.UnixNano(), time.Now().UnixNano())
	}
	return v, nil
}

// reference runs the bisection of metric over h without interruption, in
// memory.
func reference(h *bisect.SimHistory, seed uint64, metric string) (*bisect.State, error) {
	s, err := bisect.NewState(inputs(h, metric), h.Commits, fixedNow())
	if err != nil {
		return nil, err
	}
	l := newLab(h, seed, s, nil, 0)
	if err := (&bisect.Engine{Builder: l, Measurer: l, Now: fixedNow}).Run(context.Background(), s); err != nil {
		return nil, err
	}
	return s, nil
}
