package bench

import (
	"context"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// Sampler takes one sample of a scenario on a build; *Runner satisfies it.
type Sampler interface {
	Run(ctx context.Context, sc *Scenario, t Target, pt Point) (*Sample, error)
}

// Sequential is one sequential A/B comparison of two builds at one point
// (compare, the nightly pass), run by the sampling loop (Loop): samples of
// A (Targets[0]) and B interleaved in Order, in batches, a look after each
// batch, until every judged metric has a verdict or the budget is spent.
// Plan (the scenario's thresholds) plans the batches: its FirstLook, its
// looks (stats.Thresholds.Look, the rule the bisection planner follows
// too), its MaxSamples and its MaxTime; Judge gives each metric's
// thresholds, which judge it. A metric
// the scenario only records, and a statistic no sample had, wait for
// nothing.
type Sequential struct {
	Scenario *Scenario
	Point    Point
	Targets  [2]Target
	Order    Order
	Plan     stats.Thresholds
	Judge    func(m Metric) stats.Thresholds

	// Before is called before each sample with its side (0 A, 1 B), its
	// place k in the batch and the batch's size; After with each sample as
	// soon as it is taken (to store it: an error stops the comparison);
	// Look after each undecided look with the samples per side so far and
	// the number more each side will take. Any may be nil.
	Before func(side, k, batch int)
	After  func(side int, s *Sample) error
	Look   func(n, more int)
	// Now is the clock of MaxTime. Default time.Now.
	Now func() time.Time
}

// MetricComparison is the verdict on one metric, with both sides' values.
type MetricComparison struct {
	Metric     Metric
	Comparison stats.Comparison
	A, B       []float64
}

// Run runs the comparison with s and returns the verdict on every metric
// of the scenario, in the scenario's order. A sample that fails stops it
// with a *SampleError.
func (q *Sequential) Run(ctx context.Context, s Sampler) ([]MetricComparison, error) {
	now := q.Now
	if now == nil {
		now = time.Now
	}
	specs := q.Scenario.MetricSpecs()
	values := make([][2][]float64, len(specs))
	out := make([]MetricComparison, len(specs))
	start := now()
	loop := &Loop{
		Scenario: q.Scenario, Point: q.Point, Targets: q.Targets[:], Order: q.Order, First: q.Plan.FirstLook(),
		Before: q.Before,
		After: func(side int, sm *Sample) error {
			for i, m := range specs {
				// A server statistic the server lacks has no value (and a
				// warning in the sample's environment): left out, not 0.
				if v, ok := sm.Values[m.Name]; ok {
					values[i][side] = append(values[i][side], v)
				}
			}
			if q.After != nil {
				return q.After(side, sm)
			}
			return nil
		},
		Next: func(n int) (int, error) {
			overTime := q.Plan.MaxTime > 0 && now().Sub(start) >= q.Plan.MaxTime
			more := 0
			for i, m := range specs {
				c, cm := q.Plan.Look(stats.Compare(values[i][0], values[i][1], m.Direction, q.Judge(m)), overTime)
				if !m.Record && len(values[i][0])+len(values[i][1]) > 0 {
					more = max(more, cm)
				}
				out[i] = MetricComparison{Metric: m, Comparison: c, A: values[i][0], B: values[i][1]}
			}
			if more > 0 && q.Look != nil {
				q.Look(n, more)
			}
			return more, nil
		},
	}
	if _, err := loop.Run(ctx, s); err != nil {
		return nil, err
	}
	return out, nil
}
