package nightly

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/store"
)

// side is one build being measured.
type side struct {
	bench.Target
	Commit build.Commit
	Key    string // build cache key
}

func (p *Pass) side(c build.Commit, in *build.Install) side {
	return side{
		Target: bench.Target{Name: build.Short(c.Hash), BinDir: in.BinDir(), BuildOptions: p.BuildOptions},
		Commit: c,
		Key:    in.Key,
	}
}

// measure samples sc at pt on head, and on base when it is not nil,
// interleaved (A B B A blocks, either side starting, see sampleOrder),
// storing every sample under the nightly run. With a base it is one
// bench.Sequential comparison: batches until every metric has a verdict or
// the budget is spent, and it returns the verdicts; alone, it takes
// Thresholds.StartSamples samples and returns none.
func (p *Pass) measure(ctx context.Context, nightlyID int64, sc *bench.Scenario, pt bench.Point, base *side, head side) ([]MetricResult, error) {
	sides := []side{head}
	if base != nil {
		sides = []side{*base, head}
	}
	if p.ClientBin != nil {
		p.ClientBin(sides[0].BinDir)
	}
	// The scenario's thresholds plan the samples; each metric's judge it.
	th := sc.Thresholds(p.Thresholds, nil, nil)
	var taken [2]int
	ord := sampleOrder(nightlyID, sc, pt, len(sides))
	before := func(i, k, batch int) {
		p.progress("%s %s: sample %d of %d this round (%s), %d taken", sc.Name, pointName(pt), k+1, batch, sides[i].Name, taken[0]+taken[1])
	}
	after := func(i int, s *bench.Sample) error {
		if err := p.store(ctx, nightlyID, sc, pt, sides[i], taken[i], s); err != nil {
			return err
		}
		taken[i]++
		return nil
	}
	if base == nil {
		// The first night: the head alone, for the series.
		l := &bench.Loop{Scenario: sc, Point: pt, Targets: []bench.Target{head.Target}, Order: ord, First: th.StartSamples, Before: before, After: after}
		if _, err := l.Run(ctx, p.Sampler); err != nil {
			return nil, measureError(sc, pt, err)
		}
		return nil, nil
	}
	q := &bench.Sequential{
		Scenario: sc, Point: pt, Targets: [2]bench.Target{sides[0].Target, sides[1].Target}, Order: ord, Plan: th,
		Judge:  func(m bench.Metric) stats.Thresholds { return sc.Thresholds(p.Thresholds, &m, nil) },
		Before: before, After: after, Now: p.Now,
	}
	ms, err := q.Run(ctx, p.Sampler)
	if err != nil {
		return nil, measureError(sc, pt, err)
	}

	var out []MetricResult
	for _, mc := range ms {
		m, c := mc.Metric, mc.Comparison
		r := MetricResult{
			Scenario: sc.Name, Point: pt.String(), Metric: m.Name,
			Verdict: c.Verdict.String(), Change: stats.Finite(c.Change()), Direction: m.Direction, Worse: stats.Finite(c.Worse()), P: stats.Finite(c.P),
			N:   min(c.A.N, c.B.N),
			cmp: c, spec: m, sc: sc, th: q.Judge(m),
		}
		detail, _ := json.Marshal(c)
		_, err := p.Store.RecordComparison(ctx, store.Comparison{
			Scenario: sc.Name, Point: pt.String(), Metric: m.Name,
			BaseKey: base.Key, HeadKey: head.Key, Verdict: c.Verdict.String(),
			Ratio: stats.Finite(c.Ratio), RatioLow: stats.Finite(c.Lo), RatioHigh: stats.Finite(c.Hi), P: stats.Finite(c.P),
			NBase: c.A.N, NHead: c.B.N, Detail: detail, NightlyID: nightlyID,
		})
		if err != nil {
			return nil, err
		}
		p.progress("%s %s: %s %+.1f%%, %s: %s (p=%.3g, n=%d+%d)", sc.Name, pointName(pt), m.Name, 100*r.Change, r.Direction, c.Verdict, c.P, c.A.N, c.B.N)
		out = append(out, r)
	}
	return out, nil
}

// measureError names the build whose sample failed.
func measureError(sc *bench.Scenario, pt bench.Point, err error) error {
	var se *bench.SampleError
	if errors.As(err, &se) {
		return fmt.Errorf("measuring %s %s on %s: %w", sc.Name, pointName(pt), se.Target, se.Err)
	}
	return err
}

// sampleOrder is the order of the samples of sc at pt in nightly run id:
// randomized A B B A blocks (bench.Order), seeded by the run, the scenario
// and the point, so that neither side always starts and a rerun of the same
// night samples in the same order.
func sampleOrder(id int64, sc *bench.Scenario, pt bench.Point, sides int) bench.Order {
	return bench.Order{Seed: stats.SeedOf(fmt.Sprintf("%d\x00%s\x00%s", id, sc.Name, pt.String())), Targets: sides}
}

// store keeps one sample's metrics with its environment.
func (p *Pass) store(ctx context.Context, nightlyID int64, sc *bench.Scenario, pt bench.Point, s side, index int, sm *bench.Sample) error {
	env, _ := json.Marshal(sm.Env)
	envID, err := p.Store.Environment(ctx, env)
	if err != nil {
		return err
	}
	at := sm.Start.Add(sm.Elapsed)
	rows := make([]store.Sample, 0, len(sm.Values))
	for _, m := range sc.MetricSpecs() {
		v, ok := sm.Values[m.Name]
		if !ok {
			continue
		}
		rows = append(rows, store.Sample{
			BuildKey: s.Key, Commit: s.Commit.Hash, Scenario: sc.Name, Point: pt.String(), Metric: m.Name,
			Value: v, Index: index, Time: at, EnvironmentID: envID, NightlyID: nightlyID,
		})
	}
	return p.Store.AddSamples(ctx, rows)
}

func pointName(pt bench.Point) string {
	if s := pt.String(); s != "" {
		return s
	}
	return "(no matrix)"
}
