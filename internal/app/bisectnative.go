package app

import (
	"context"
	"fmt"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// NativeRuns is how many runs without a counter each culprit and its
// parent get when a bisection judged an instruction count: the elapsed
// time the report shows beside the count, recorded, never judged.
const NativeRuns = 3

// bisectNativeTimes marks a finding judged on an instructions metric with
// its counter, and gives each exact culprit the elapsed time of the
// counted step against its parent from NativeRuns interleaved runs of
// each without a counter (bench.Scenario.Native). A count cannot see
// waiting; these times show what the regression costs in time, or that
// it costs none. A failure leaves a note and the finding without them.
func bisectNativeTimes(ctx context.Context, sink Sink, runner *bench.Runner, bb *bisectBuilder, sc *bench.Scenario,
	metric bench.Metric, point bench.Point, counter string, f *finding.Finding) {
	if metric.Value != "instructions" {
		return
	}
	f.Counter = counter
	for i := range f.Culprits {
		c := &f.Culprits[i]
		if c.IsRange() || ctx.Err() != nil {
			continue
		}
		native, err := nativeTimes(ctx, runner, bb, sc, metric, culpritPoint(sc, point, *c), c.Parent.Hash, c.Commit.Hash)
		if err != nil {
			sink.note("elapsed time of %s against its parent not measured: %v", c.Commit.ShortHash(), err)
			continue
		}
		c.Native = native
		sink.note("%s against its parent without a counter: step %s %.3fs -> %.3fs (%d runs each, recorded, not judged)",
			c.Commit.ShortHash(), native.Step, native.Parent.Median, native.Culprit.Median, NativeRuns)
	}
}

func nativeTimes(ctx context.Context, runner *bench.Runner, bb *bisectBuilder, sc *bench.Scenario, metric bench.Metric,
	point bench.Point, parent, culprit string) (*finding.NativeTime, error) {
	var targets []bench.Target
	for _, h := range []string{parent, culprit} {
		t, err := bb.Build(ctx, h)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t.(bisectTarget).Target)
	}
	name := bench.NativeTime(metric.Name)
	values := map[string][]float64{}
	err := bench.Interleave(ctx, runner, sc.Native(), targets, point, bench.Order{}, NativeRuns, func(_ int, s *bench.Sample) error {
		v, ok := s.Values[name]
		if !ok {
			return fmt.Errorf("no elapsed time of step %s", metric.Step)
		}
		values[s.Target] = append(values[s.Target], v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	side := func(xs []float64) finding.Side {
		s := stats.Summarize(xs)
		return finding.Side{Median: s.Median, RelStddev: s.RelStddev, N: len(xs)}
	}
	n := &finding.NativeTime{Step: metric.Step, Unit: "s", Parent: side(values[targets[0].Name]), Culprit: side(values[targets[1].Name])}
	if n.Parent.Median > 0 {
		n.Ratio = n.Culprit.Median / n.Parent.Median
	}
	return n, nil
}
