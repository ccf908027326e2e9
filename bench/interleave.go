package bench

import (
	"context"
	"fmt"
)

// InterleaveOrder returns the order in which Interleave measures targets:
// indexes into the targets, perTarget times each. Rounds alternate between
// forward and reverse order (A B, B A, A B, ... = A B B A A B), so a
// steady drift of the machine adds the same to every target on average and
// no target always runs right after another.
func InterleaveOrder(targets, perTarget int) []int {
	order := make([]int, 0, targets*perTarget)
	for round := 0; round < perTarget; round++ {
		for i := 0; i < targets; i++ {
			if round%2 == 0 {
				order = append(order, i)
			} else {
				order = append(order, targets-1-i)
			}
		}
	}
	return order
}

// Interleave runs perTarget samples of every target at pt in
// InterleaveOrder and hands each sample to onSample as soon as it is
// measured (so callers can save state between samples). It first checks
// the scenario's settings against every target's server (Runner.Check),
// then stops at the first error, from a sample or from onSample.
func Interleave(ctx context.Context, r *Runner, sc *Scenario, targets []Target, pt Point, perTarget int, onSample func(Sample) error) error {
	if err := r.Check(ctx, sc, targets, pt); err != nil {
		return err
	}
	for _, i := range InterleaveOrder(len(targets), perTarget) {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, err := r.Run(ctx, sc, targets[i], pt)
		if err != nil {
			return fmt.Errorf("sample of %s: %w", targets[i].Name, err)
		}
		if onSample != nil {
			if err := onSample(*s); err != nil {
				return err
			}
		}
	}
	return nil
}
