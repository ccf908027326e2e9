package bench

import (
	"context"
	"fmt"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// Order is the sample order of an interleaved comparison: stats.Order,
// the one order the sampling loop and the bisection planner share.
type Order = stats.Order

// InterleaveOrder returns the order of perTarget rounds with target 0
// starting every block (Order with seed 0): A B B A A B.
func InterleaveOrder(targets, perTarget int) []int {
	return Order{Targets: targets}.Rounds(0, perTarget)
}

// Interleave runs samples of the targets at pt in order (indexes into
// targets, from Order.Rounds) and hands each sample to onSample as soon as
// it is measured (so callers can save state between samples). It stops at
// the first error, from a sample or from onSample. It first checks the
// scenario's settings against every target's server (Runner.Check).
func Interleave(ctx context.Context, r *Runner, sc *Scenario, targets []Target, pt Point, order []int, onSample func(Sample) error) error {
	if err := r.Check(ctx, sc, targets, pt); err != nil {
		return err
	}
	for _, i := range order {
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
