package bench

import (
	"context"
	"fmt"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// Order is the sample order of an interleaved comparison: stats.Order,
// the one order the sampling loop and the bisection planner share.
type Order = stats.Order

// Loop is the one sampling loop of pgbisect's measurements outside a
// bisection (compare, the nightly pass, revert checks, profiles, native
// times): samples of the targets interleaved in Order, in batches, a look
// after each batch, until the look asks for no more. The bisection
// planner takes its samples one at a time through its pure Next, in the
// same order (stats.Order) and with the same look rule
// (stats.Thresholds.Next).
type Loop struct {
	Scenario *Scenario
	Point    Point
	Targets  []Target
	// Order is the sample order; its Targets is set to len(Targets).
	Order Order
	// First is the number of runs of each target before the first look.
	First int
	// Next is the look after each batch, with the runs of each target so
	// far: the number more each takes before the next look, 0 to stop.
	// Nil: First runs of each and no look.
	Next func(n int) (more int, err error)

	// Before is called before each sample with its target (an index into
	// Targets), its place k in the batch and the batch's size; After with
	// each sample as soon as it is taken (to store it: an error stops the
	// loop and is returned as it is). Either may be nil.
	Before func(side, k, batch int)
	After  func(side int, s *Sample) error
}

// SampleError is a sample that failed: which target, and why.
type SampleError struct {
	Target string
	Err    error
}

func (e *SampleError) Error() string { return fmt.Sprintf("sample of %s: %v", e.Target, e.Err) }
func (e *SampleError) Unwrap() error { return e.Err }

// Run takes the samples with s and returns the runs of each target taken.
// A sample that fails stops it with a *SampleError.
func (l *Loop) Run(ctx context.Context, s Sampler) (int, error) {
	order := l.Order
	order.Targets = len(l.Targets)
	n, want := 0, l.First
	for want > n {
		batch := order.Rounds(n, want-n)
		for k, side := range batch {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			if l.Before != nil {
				l.Before(side, k, len(batch))
			}
			sm, err := s.Run(ctx, l.Scenario, l.Targets[side], l.Point)
			if err != nil {
				return n, &SampleError{Target: l.Targets[side].Name, Err: err}
			}
			if l.After != nil {
				if err := l.After(side, sm); err != nil {
					return n, err
				}
			}
		}
		n = want
		if l.Next == nil {
			break
		}
		more, err := l.Next(n)
		if err != nil {
			return n, err
		}
		want = n + max(more, 0)
	}
	return n, nil
}

// Interleave takes runs samples of each target at pt in order, with r, and
// hands each to onSample as soon as it is measured (so callers can save
// state between samples): a Loop with no look. It stops at the first
// error, from a sample or from onSample. It first checks the scenario's
// settings against every target's server (Runner.Check).
func Interleave(ctx context.Context, r *Runner, sc *Scenario, targets []Target, pt Point, order Order, runs int, onSample func(side int, s *Sample) error) error {
	if err := r.Check(ctx, sc, targets, pt); err != nil {
		return err
	}
	_, err := (&Loop{Scenario: sc, Point: pt, Targets: targets, Order: order, First: runs, After: onSample}).Run(ctx, r)
	return err
}
