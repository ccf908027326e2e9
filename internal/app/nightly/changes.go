package nightly

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bench/stats/changepoint"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
)

// Candidate is a shift the change-point pass found in a nightly series and
// what its confirming comparison said.
type Candidate struct {
	Scenario string `json:"scenario"`
	Point    string `json:"point,omitempty"`
	Metric   string `json:"metric"`
	// Before is the last night's commit before the shift, At the first
	// after it, Until the last of the shifted segment (the newest night
	// or the one before the next shift).
	Before string `json:"before"`
	At     string `json:"at"`
	Until  string `json:"until"`
	// RelChange and P are the change-point statistics over the series
	// (means of the nightly medians, Welch's t-test).
	RelChange float64 `json:"rel_change"`
	P         float64 `json:"p"`
	// Verdict is the fresh comparison of Before with Until; Change its
	// signed change (Until/Before - 1), Direction which way is better.
	Verdict   string          `json:"verdict"`
	Change    float64         `json:"change"`
	Direction stats.Direction `json:"direction,omitempty"`
	Finding   string          `json:"finding,omitempty"`
}

// ShiftWindow is how many nights around a change point the pass looks at:
// the confirming comparison spans up to ShiftWindow nights on each side of
// it (so a shift spread over several nights is inside the range), and a
// change point within ShiftWindow nights of one already handled is the same
// shift (detection places a slow shift a night or two differently as nights
// are added).
const ShiftWindow = 7

// MaxCandidates bounds the confirmations one pass runs (each is a fresh
// comparison and perhaps a bisection); the rest wait for the next night.
const MaxCandidates = 3

// changePoints runs change-point detection over every nightly series of the
// suite and confirms each new candidate with a fresh interleaved comparison
// of the commit before the shift and the last commit of the shifted
// segment. A confirmed regression is bisected between those two commits; a
// confirmed improvement is reported; anything else is recorded and not
// believed. Each candidate is checked once (Detail.Handled).
func (p *Pass) changePoints(ctx context.Context, res *Result) error {
	checked := 0
	for _, sc := range p.Scenarios {
		for _, pt := range sc.Points() {
			for _, m := range sc.MetricSpecs() {
				th := sc.Thresholds(p.Thresholds, &m, nil)
				series, err := p.Store.Series(ctx, p.Branch, sc.Name, m.Name, pt.String())
				if err != nil {
					return err
				}
				medians := make([]float64, len(series))
				for i, s := range series {
					medians[i] = stats.Summarize(s.Values).Median
				}
				cps := seriesChanges(medians, th)
				for k, cp := range cps {
					lo, end := 0, len(series)
					if k > 0 {
						lo = cps[k-1].Index
					}
					if k+1 < len(cps) {
						end = cps[k+1].Index
					}
					c := Candidate{
						Scenario: sc.Name, Point: pt.String(), Metric: m.Name,
						Before:    series[max(lo, cp.Index-ShiftWindow)].Commit,
						At:        series[cp.Index].Commit,
						Until:     series[min(end, cp.Index+ShiftWindow)-1].Commit,
						RelChange: cp.RelChange, P: cp.P, Direction: m.Direction,
					}
					near := make([]string, 0, 2*ShiftWindow+1)
					for i := max(0, cp.Index-ShiftWindow); i < min(len(series), cp.Index+ShiftWindow+1); i++ {
						near = append(near, series[i].Commit)
					}
					if res.Detail.handledNear(c.Scenario, c.Point, c.Metric, near) || c.Before == c.Until {
						continue
					}
					key := shiftKey(c.Scenario, c.Point, c.Metric, c.At)
					if checked == MaxCandidates {
						p.log().Info("nightly: change point left for the next pass", slog.String("shift", key))
						continue
					}
					checked++
					res.Detail.Handled = append(res.Detail.Handled, key)
					if err := p.confirm(ctx, res, &c, cp.Index); err != nil {
						return err
					}
					res.Detail.ChangePoints = append(res.Detail.ChangePoints, c)
				}
			}
		}
	}
	return nil
}

// seriesChanges finds the shifts of a nightly series of medians that
// are at least the metric's smallest effect. The metric's own min_effect
// sets it, so an instruction count, whose nights differ by thousandths of
// a percent, can track a 1% step that a time's noise would hide.
func seriesChanges(medians []float64, th stats.Thresholds) []changepoint.ChangePoint {
	return changepoint.Detect(medians, changepoint.Options{MinMagnitude: th.MinEffect})
}

// confirm measures c.Before against c.Until afresh and acts on the verdict.
func (p *Pass) confirm(ctx context.Context, res *Result, c *Candidate, index int) error {
	p.progress("change point in %s %s %s at %s (%+.1f%% over the series, %s): confirming", c.Scenario, c.Point, c.Metric, build.Short(c.At), 100*c.RelChange, c.Direction)
	before, until := p.commit(c.Before), p.commit(c.Until)
	bi, err := p.Builder.Build(ctx, c.Before)
	if err != nil {
		return fmt.Errorf("building %s to confirm a change point: %w", build.Short(c.Before), err)
	}
	ui, err := p.Builder.Build(ctx, c.Until)
	if err != nil {
		return fmt.Errorf("building %s to confirm a change point: %w", build.Short(c.Until), err)
	}
	bs, us := p.side(before, bi), p.side(until, ui)
	var r *MetricResult
	for _, sc := range p.Scenarios {
		if sc.Name != c.Scenario {
			continue
		}
		pt, err := sc.FindPoint(c.Point)
		if err != nil {
			return err
		}
		// Samples of a confirmation belong to no night: they would skew
		// the series they are checking.
		rs, err := p.measure(ctx, 0, sc, pt, &bs, us)
		if err != nil {
			return err
		}
		for i := range rs {
			if rs[i].Metric == c.Metric {
				r = &rs[i]
			}
		}
	}
	if r == nil {
		return fmt.Errorf("change point in %s %s: the scenario no longer has that metric", c.Scenario, c.Metric)
	}
	c.Verdict, c.Change = r.Verdict, r.Change
	p.log().Info("nightly: change point checked", slog.String("scenario", c.Scenario), slog.String("metric", c.Metric),
		slog.String("at", build.Short(c.At)), slog.String("verdict", c.Verdict))
	cps := []finding.ChangePoint{{Index: index, Confirmed: r.cmp.Verdict.Different()}}
	switch r.cmp.Verdict {
	case stats.Regression:
		f, err := p.Bisect(ctx, BisectRequest{Good: before, Bad: until, Scenario: r.sc, Metric: c.Metric, Point: c.Point, Thresholds: r.th})
		if err != nil {
			return fmt.Errorf("bisecting the change point %s..%s: %w", build.Short(c.Before), build.Short(c.Until), err)
		}
		if f.Branch == "" {
			f.Branch = p.Branch
		}
		f.Scenario = c.Scenario
		f.Series = p.series(ctx, c.Scenario, c.Metric, r.spec.Unit, c.Point, cps)
		c.Finding = f.ID
		return p.report(ctx, res, f)
	case stats.Improvement:
		f := comparisonFinding(finding.Improvement, p.Branch, *r, before, until, p.Now())
		f.Series = p.series(ctx, c.Scenario, c.Metric, r.spec.Unit, c.Point, cps)
		c.Finding = f.ID
		return p.report(ctx, res, f)
	}
	return nil
}
