package nightly

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"

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
// interleaved (A B B A blocks, either side starting, see sampleOrder), storing every sample under the nightly run. With
// a base it keeps sampling in batches until every metric has a verdict or
// the budget is spent (stats.Thresholds.More), and returns the verdicts;
// alone, it takes Thresholds.StartSamples samples and returns none.
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
	specs := sc.MetricSpecs()
	mths := make([]stats.Thresholds, len(specs))
	for i := range specs {
		mths[i] = sc.Thresholds(p.Thresholds, &specs[i], nil)
	}
	values := make([]map[string][]float64, len(sides))
	taken := make([]int, len(sides))
	for i := range values {
		values[i] = map[string][]float64{}
	}
	start := p.Now()
	need := th.StartSamples
	var comps []stats.Comparison
	ord := sampleOrder(nightlyID, sc, pt, len(sides))
	rounds := 0
	for {
		order := ord.Rounds(rounds, need)
		rounds += need
		for k, i := range order {
			p.progress("%s %s: sample %d of %d this round (%s), %d taken", sc.Name, pointName(pt), k+1, len(order), sides[i].Name, sum(taken))
			s, err := p.Sampler.Run(ctx, sc, sides[i].Target, pt)
			if err != nil {
				return nil, fmt.Errorf("measuring %s %s on %s: %w", sc.Name, pointName(pt), sides[i].Name, err)
			}
			if err := p.store(ctx, nightlyID, sc, pt, sides[i], taken[i], s); err != nil {
				return nil, err
			}
			taken[i]++
			for name, v := range s.Values {
				values[i][name] = append(values[i][name], v)
			}
		}
		if base == nil {
			return nil, nil
		}
		comps = comps[:0]
		more := 0
		for i, m := range specs {
			c := stats.Compare(values[0][m.Name], values[1][m.Name], m.Direction, mths[i])
			comps = append(comps, c)
			more = max(more, mths[i].More(c))
		}
		if more == 0 {
			break
		}
		if th.MaxTime > 0 && p.Now().Sub(start) >= th.MaxTime {
			for i := range comps {
				comps[i] = comps[i].AtBudget()
			}
			break
		}
		need = more
	}

	var out []MetricResult
	for i, m := range specs {
		c := comps[i]
		r := MetricResult{
			Scenario: sc.Name, Point: pt.String(), Metric: m.Name,
			Verdict: c.Verdict.String(), Change: finite(c.Change()), Direction: m.Direction, Worse: finite(c.Worse()), P: finite(c.P),
			N:   min(c.A.N, c.B.N),
			cmp: c, spec: m, sc: sc, th: mths[i],
		}
		detail, _ := json.Marshal(c)
		_, err := p.Store.RecordComparison(ctx, store.Comparison{
			Scenario: sc.Name, Point: pt.String(), Metric: m.Name,
			BaseKey: base.Key, HeadKey: head.Key, Verdict: c.Verdict.String(),
			Ratio: finite(c.Ratio), RatioLow: finite(c.Lo), RatioHigh: finite(c.Hi), P: finite(c.P),
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

// sampleOrder is the order of the samples of sc at pt in nightly run id:
// randomized A B B A blocks (bench.Order), seeded by the run, the scenario
// and the point, so that neither side always starts and a rerun of the same
// night samples in the same order.
func sampleOrder(id int64, sc *bench.Scenario, pt bench.Point, sides int) bench.Order {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%s", id, sc.Name, pt.String())
	return bench.Order{Seed: bench.Mix64(h.Sum64()) | 1, Targets: sides}
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

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// finite maps NaN and infinities to 0, for storing and JSON.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
