package bisect

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// This file is the stop when the culprits explain the change (issue 30,
// Plan 3): once the search has nothing left but the ranges beside its
// suspects (the deferred pairs that Plan 1 judges at the end, merged), it
// asks whether the suspects already account for the endpoints' change.
// When the remainder, the endpoints' change with the suspects' combined
// change taken out, is shown smaller than the minimum effect, those ranges
// cannot hold another culprit of the minimum effect unless it is cancelled
// by an improvement in the range, and the search stops instead of proving
// each of them free of one. The decision is a pure function of the State,
// like every other: it is recorded in State.Explained with its evidence,
// and the report shows it with its caveat.

// Interval is a change as a ratio (B/A) with its confidence interval.
type Interval struct {
	Ratio float64 `json:"ratio"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
}

// String is "+12.3% [+8.1%, +16.0%]".
func (iv Interval) String() string {
	return fmt.Sprintf("%+.1f%% [%+.1f%%, %+.1f%%]", 100*(iv.Ratio-1), 100*(iv.Lo-1), 100*(iv.Hi-1))
}

// Explanation is the evidence of a search stopped because its suspects
// explain the endpoints' change.
type Explanation struct {
	// Endpoints is the endpoints' change, Combined the suspects' changes
	// multiplied together (from the search's comparisons that located
	// them), Remainder the endpoints' change divided by Combined: what the
	// suspects leave unexplained. The intervals combine in log space as
	// independent estimates (their half-widths add in quadrature).
	Endpoints Interval `json:"endpoints"`
	Combined  Interval `json:"combined"`
	Remainder Interval `json:"remainder"`
	// Bound is the remainder's upper bound as a change for the worse (in
	// the metric's direction), below the minimum effect when the search
	// stopped.
	Bound float64 `json:"bound"`
	// Suspects are the suspects the explanation counts on, each as the
	// range of commits it spans.
	Suspects []Range `json:"suspects"`
	// Ranges are the ranges beside the suspects the search left unjudged.
	Ranges []Range `json:"ranges"`
	// Checked is set once the checks are done: Confirmed then says
	// whether the culprits they confirmed, with their fresh samples, still
	// explain the change (Recheck is that evidence); when they do not, the
	// Ranges are reported as unjudged (State.Unjudged).
	Checked   bool         `json:"checked,omitempty"`
	Confirmed bool         `json:"confirmed,omitempty"`
	Recheck   *Explanation `json:"recheck,omitempty"`
}

// Caveat is the limit of a search stopped when its culprits explain the
// change, for the report.
const Caveat = "the search stopped once the culprits found explained the endpoints' change (the rest shown smaller than the minimum effect) instead of judging every range beside them: " +
	"a regression and an improvement that cancel each other inside the range would be missed; 'pgbisect bisect --exhaustive' judges every range"

// explainPlan is the first Plan that stops when the culprits explain the
// change.
const explainPlan = 3

// explain decides, once the search's pass has nothing left but deferred
// pairs, whether its suspects explain the endpoints' change. When they
// do, it records the Explanation and reports true: the search stops, the
// deferred ranges unjudged.
func (s *State) explain(now time.Time) bool {
	if s.Plan < explainPlan || s.Exhaustive || s.Explained != nil {
		return false
	}
	var ranges []Range
	var sus []*Result
	var susRanges []Range
	for j := 0; j+1 < len(s.Points); j++ {
		l, r := s.Points[j], s.Points[j+1]
		k := s.pairIndex(l, r)
		p := s.Pairs[k]
		switch {
		case s.deferred(k):
			ranges = append(ranges, Range{Parent: l, First: l + 1, Last: r, Result: p.Result})
		case p.followed():
			// A suspect counts with its own verdict only: a forced pair
			// or one inferred was never shown a regression.
			if p.Verdict != VerdictRegression || p.Result == nil || k == 0 {
				return false
			}
			sus = append(sus, p.Result)
			susRanges = append(susRanges, Range{Parent: l, First: l + 1, Last: r, Result: p.Result})
		}
	}
	if len(ranges) == 0 || len(sus) == 0 {
		return false
	}
	ex, ok := s.explanation(s.Pairs[0].Result, sus)
	if !ok || ex.Bound >= s.Inputs.Thresholds.MinEffect {
		return false
	}
	ex.Suspects, ex.Ranges = susRanges, ranges
	s.Explained = ex
	var names []string
	for _, r := range ranges {
		names = append(names, s.RangeName(r))
	}
	s.logf(now, "explained", "", "the %d suspect(s) explain the endpoints' change: endpoints %s, suspects together %s, the rest %s (at worst %+.1f%%, under the minimum effect of %.3g%%); "+
		"the %d range(s) beside them are not judged (%s)",
		len(sus), ex.Endpoints, ex.Combined, ex.Remainder, 100*ex.Bound, 100*s.Inputs.Thresholds.MinEffect, len(ranges), strings.Join(names, ", "))
	return true
}

// explanation combines the endpoints' change with the suspects' changes
// (parts): the combined change, the remainder, and the remainder's upper
// bound as a change for the worse. It reports false when an interval is
// missing or not finite.
func (s *State) explanation(endpoints *Result, parts []*Result) (*Explanation, bool) {
	logOf := func(r *Result) (mid, lo, hi float64, ok bool) {
		if r == nil || r.Ratio <= 0 || r.Lo <= 0 || r.Hi <= 0 || r.Lo > r.Ratio || r.Hi < r.Ratio {
			return 0, 0, 0, false
		}
		mid = math.Log(r.Ratio)
		return mid, mid - math.Log(r.Lo), math.Log(r.Hi) - mid, true
	}
	eMid, eLo, eHi, ok := logOf(endpoints)
	if !ok {
		return nil, false
	}
	var cMid, cLo2, cHi2 float64
	for _, p := range parts {
		m, lo, hi, ok := logOf(p)
		if !ok {
			return nil, false
		}
		cMid += m
		cLo2 += lo * lo
		cHi2 += hi * hi
	}
	rMid := eMid - cMid
	// The remainder is large when the endpoints' change is and the
	// suspects' is small: its upper end takes the endpoints' upper
	// half-width and the suspects' lower ones.
	rHi := rMid + math.Sqrt(eHi*eHi+cLo2)
	rLo := rMid - math.Sqrt(eLo*eLo+cHi2)
	ex := &Explanation{
		Endpoints: Interval{Ratio: endpoints.Ratio, Lo: endpoints.Lo, Hi: endpoints.Hi},
		Combined:  Interval{Ratio: math.Exp(cMid), Lo: math.Exp(cMid - math.Sqrt(cLo2)), Hi: math.Exp(cMid + math.Sqrt(cHi2))},
		Remainder: Interval{Ratio: math.Exp(rMid), Lo: math.Exp(rLo), Hi: math.Exp(rHi)},
		Bound:     math.Exp(rHi) - 1,
	}
	if s.Inputs.Direction == stats.HigherIsBetter {
		ex.Bound = 1 - math.Exp(rLo)
	}
	return ex, true
}

// recheckExplained, once the checks are done, asks whether the culprits
// they confirmed still explain the change with their fresh samples. When
// they do not (a suspect the explanation counted on was not confirmed, or
// its fresh change is smaller), the ranges the search left unjudged may
// hold another regression: they are reported as such (Unjudged).
func (s *State) recheckExplained(now time.Time) {
	ex := s.Explained
	if ex == nil || ex.Checked {
		return
	}
	ex.Checked = true
	var parts []*Result
	for _, c := range s.Culprits {
		parts = append(parts, c.Result)
	}
	if len(parts) > 0 {
		if re, ok := s.explanation(s.Pairs[0].Result, parts); ok {
			ex.Recheck = re
			ex.Confirmed = re.Bound < s.Inputs.Thresholds.MinEffect
		}
	}
	if ex.Confirmed {
		s.logf(now, "explained", "", "the confirmed culprit(s) explain the endpoints' change with fresh samples: together %s, the rest %s (at worst %+.1f%%)",
			ex.Recheck.Combined, ex.Recheck.Remainder, 100*ex.Recheck.Bound)
		return
	}
	why := "the culprits confirmed no longer explain the endpoints' change with fresh samples"
	if ex.Recheck != nil {
		why += fmt.Sprintf(" (the rest %s, at worst %+.1f%%)", ex.Recheck.Remainder, 100*ex.Recheck.Bound)
	}
	s.logf(now, "explained", "", "%s: the %d range(s) the search left unjudged may hold another regression", why, len(ex.Ranges))
	for _, r := range ex.Ranges {
		r.Note = why + ", and this range beside them was not judged: it may hold another regression; 'pgbisect bisect --exhaustive' judges it"
		s.Unjudged = append(s.Unjudged, r)
	}
}

// SetExhaustive turns off the stop when the culprits explain the change,
// in the bisection and each of its searches, from now on: a decision
// already made stands.
func (s *State) SetExhaustive() {
	for _, sub := range append([]*State{s}, s.Searches()...) {
		sub.Exhaustive = true
	}
}

// halvesExplain reports, from Plan 3, whether the halves of pair k (kids),
// none of them a regression, together show the change k was followed for
// to be smaller than the minimum effect (their changes multiplied, the
// upper end of the interval below it) or, for the endpoints, not worse at
// all (the lower end at or below no change). Then no half is forced: the
// regression of k was noise or is made of changes each below the minimum
// effect, k is left as an unresolved range (see unresolved), and the
// ranges deferred beside it are not judged. The decision is kept
// (Pair.Unexplained).
func (s *State) halvesExplain(k int, kids []int, now time.Time) bool {
	if s.Plan < explainPlan {
		return false
	}
	if s.Pairs[k].Unexplained {
		return true // decided before; a merged pair judged since changes nothing
	}
	if s.Exhaustive || len(kids) != 2 {
		return false
	}
	var parts []*Result
	for _, c := range kids {
		parts = append(parts, s.Pairs[c].Result)
	}
	one := &Result{Ratio: 1, Lo: 1, Hi: 1}
	ex, ok := s.explanation(one, parts)
	if !ok {
		return false
	}
	// The halves' combined change is the remainder's inverse here: its
	// worse end is the remainder's better one.
	worseLo, worseHi := ex.Combined.Lo-1, ex.Combined.Hi-1
	if s.Inputs.Direction == stats.HigherIsBetter {
		worseLo, worseHi = 1-ex.Combined.Hi, 1-ex.Combined.Lo
	}
	why := fmt.Sprintf("less than the minimum effect of %.3g%%", 100*s.Inputs.Thresholds.MinEffect)
	switch {
	case worseHi < s.Inputs.Thresholds.MinEffect:
	case k == 0 && worseLo <= 0:
		// The first split: its halves, sampled afresh, do not reproduce
		// the endpoints' regression at all.
		why = "not shown worse at all: the endpoints' regression is not reproduced"
	default:
		return false
	}
	s.Pairs[k].Unexplained = true
	s.logf(now, "explained", s.Commits[s.Pairs[k].Right].Hash, "neither half of %s..%s is a regression and together they change it by %s, %s: no half is followed",
		s.Commits[s.Pairs[k].Left].Short(), s.Commits[s.Pairs[k].Right].Short(), ex.Combined, why)
	return true
}
