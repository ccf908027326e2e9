package finding

import (
	"fmt"
	"math"
	"strings"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
)

// PointList is the one-string form of several matrix points, as --point
// takes it: "clients=1;clients=4".
func PointList(points []string) string { return strings.Join(points, ";") }

// fromCurve is FromBisection for a bisection of several points: the
// endpoints at every point, each culprit once with the curve before and
// after it (its comparison at every point: the check that confirmed it
// where it was found, the curve check elsewhere), and the log of every
// point's search.
func fromCurve(s *bisect.State, r Report) *Finding {
	in := s.Inputs
	searches := s.Searches()
	// The finding of the first point carries what every point shares.
	first := *searches[0]
	first.Curve, first.Culprits, first.Outcome, first.Summary = nil, nil, s.Outcome, s.Summary
	first.ID, first.Started, first.Updated = s.ID, s.Started, s.Updated
	first.BuildsDone, first.SamplesTaken, first.Unresolved, first.Unconfirmed = s.BuildsDone, s.SamplesTaken, nil, nil
	first.Explained, first.Unjudged = nil, nil // each point's, below
	f := FromBisection(&first, r)
	f.Point, f.Points = PointList(in.Points), in.Points
	sp := s.Spend()
	f.SamplesBy = &sp
	dir := in.Direction
	if dir == "" {
		dir = stats.LowerIsBetter
	}
	cmp := func(point string, res *bisect.Result, verdict bisect.Verdict) Comparison {
		return comparisonOf(in, dir, point, res, verdict)
	}
	f.Comparisons = nil
	for _, sub := range searches {
		if p := sub.Pairs[0]; p.Result != nil {
			f.Comparisons = append(f.Comparisons, cmp(sub.Inputs.Point, p.Result, p.Verdict))
		}
	}
	commit := func(i int) Commit { return commitOf(s, r, i) }
	f.Culprits = nil
	for _, cu := range s.CurveCulprits() {
		nc := Culprit{Commit: commit(cu.Last), Parent: commit(cu.Parent), Verified: true}
		if len(cu.Candidates) > 1 {
			for _, i := range cu.Candidates {
				nc.Range = append(nc.Range, commit(i))
			}
		}
		for p, sub := range searches {
			point := sub.Inputs.Point
			if a := cu.At[p]; a != nil {
				nc.Comparisons = append(nc.Comparisons, cmp(point, a.Result, bisect.VerdictRegression))
				continue
			}
			if ch := s.CurveCheck(p, cu.Range); ch != nil {
				c := cmp(point, ch.Result, ch.Verdict)
				c.Curve = true
				nc.Comparisons = append(nc.Comparisons, c)
			}
		}
		f.Culprits = append(f.Culprits, nc)
	}
	f.Kind = kindOf(s.Outcome, len(f.Culprits))
	// The log of every point, point by point.
	f.Log = nil
	for _, sub := range searches {
		for _, st := range bisectionLog(sub, commit) {
			st.Point = sub.Inputs.Point
			f.Log = append(f.Log, st)
		}
	}
	for _, sub := range searches {
		for _, u := range sub.Unresolved {
			f.Warnings = append(f.Warnings, fmt.Sprintf("at %s: unresolved range %s: %s", sub.Inputs.Point, s.RangeName(u), u.Note))
		}
		for _, u := range sub.Unconfirmed {
			f.Warnings = append(f.Warnings, fmt.Sprintf("at %s: suspect %s not blamed: %s", sub.Inputs.Point, s.RangeName(u), u.Note))
		}
		for _, u := range sub.Unjudged {
			f.Warnings = append(f.Warnings, fmt.Sprintf("at %s: range %s: %s", sub.Inputs.Point, s.RangeName(u), u.Note))
		}
		if w := explainedWarning(sub); w != "" {
			f.Warnings = append(f.Warnings, fmt.Sprintf("at %s: %s", sub.Inputs.Point, w))
		}
		if p := sub.Pairs[0]; p.Result != nil && sub != searches[0] {
			for _, w := range p.Result.Warnings {
				f.Warnings = append(f.Warnings, fmt.Sprintf("at %s: %s", sub.Inputs.Point, w))
			}
		}
	}
	return f
}

// BlamedPoint is the point where culprit c was blamed with the largest
// effect: where a revert check or a profile of it is taken. It is ""
// for a culprit of a single point without a matrix.
func BlamedPoint(c Culprit) string {
	best, bestD := "", -1.0
	for _, cmp := range c.Comparisons {
		if cmp.Curve {
			continue
		}
		if d := math.Abs(cmp.Ratio - 1); d > bestD {
			best, bestD = cmp.Point, d
		}
	}
	return best
}
