// Package changepoint finds the points where a series of nightly results
// shifted to a new level, with E-divisive means as Apache Otava (formerly
// DataStax Hunter) does it.
//
// Night-to-night comparison catches a regression that lands in one commit and
// is large enough to see in one night's samples. It misses a slow drift (1%
// a night for a week) and a shift that is smaller than one night's noise but
// persists. A change-point pass over the whole series catches those.
//
// The method is the split-and-merge variant of E-divisive means from Fleming
// et al., "Hunter: Using Change Point Detection to Hunt for Performance
// Regressions" (ICPE 2023), as implemented in Otava's analysis.py:
//
//   - Split: slide a window (Options.Window points, half a window per step)
//     over the series. Inside each window, E-divisive means (Matteson and
//     James 2014) repeatedly picks the split that maximises the energy
//     distance statistic q̂ between the points before and after it, and keeps
//     it while the split is significant at a relaxed level (10 × MaxP). The
//     union over all windows is the set of "weak" change points.
//   - Merge: over the whole series, repeatedly drop the weakest change point
//     (the largest p-value above MaxP, else the smallest relative change below
//     MinMagnitude) and re-test its neighbours, until every remaining change
//     point passes both.
//
// The one design choice that matters is the significance test. The original
// E-divisive method estimates significance from random permutations, so the
// same series can give different answers on different runs. Otava replaced it
// with a deterministic two-sample t-test between the segments on either side
// of the candidate (bounded by the neighbouring change points), and so do we,
// so that a nightly report never changes when it is recomputed. We use
// Welch's t-test (unequal variances) where Otava uses Student's pooled one: a
// pooled test lets a single point borrow the other side's variance, so one
// outlier on the last night would look like a significant shift. Under Welch
// a side of one point carries no variance information and is never
// significant; a shift is believed only when at least two points sit on each
// side of it.
//
// The package is pure: no I/O, no logging, no randomness.
package changepoint

import (
	"math"
	"slices"
)

// Options tunes Detect. A zero field takes its value from DefaultOptions.
type Options struct {
	// MaxP is the largest p-value (two-sided Welch t-test between the
	// segments on either side) a change point may have. Default 0.001, as in
	// Otava.
	MaxP float64
	// MinMagnitude is the smallest relative change of the mean a change
	// point must show: max(|after/before − 1|, |before/after − 1|), a
	// fraction (0.02 means 2%). Default 0: every significant shift counts.
	MinMagnitude float64
	// Window is the length of the split step's sliding window, in points.
	// Default 50, as in Otava. A window as long as the series gives the
	// original, unwindowed E-divisive recursion.
	Window int
}

// DefaultOptions are Otava's defaults.
var DefaultOptions = Options{MaxP: 0.001, MinMagnitude: 0, Window: 50}

// ChangePoint is one shift of the series' level.
type ChangePoint struct {
	// Index is the first point of the new level: series[Index-1] is the last
	// point before the change and series[Index] the first after it.
	Index int
	// Before and After are the means of the segments on either side,
	// bounded by the neighbouring change points (or the series' ends).
	Before, After float64
	// BeforeStd and AfterStd are the sample standard deviations of those
	// segments (0 for a one-point segment).
	BeforeStd, AfterStd float64
	// BeforeN and AfterN are the lengths of those segments.
	BeforeN, AfterN int
	// RelChange is After/Before − 1: +0.10 means the level rose by 10%
	// (for a time metric, slower; for a rate metric, faster).
	RelChange float64
	// P is the two-sided p-value of Welch's t-test between the segments.
	P float64
	// Q is the E-divisive statistic q̂ that proposed this point in the split
	// step (larger means a more distinct split); 0 when unknown.
	Q float64
}

// Magnitude is max(|After/Before − 1|, |Before/After − 1|), the relative
// change in whichever direction is larger, as Otava's merge step uses it.
func (c ChangePoint) Magnitude() float64 {
	return magnitude(c.Before, c.After)
}

func magnitude(before, after float64) float64 {
	var f, b float64
	if before != 0 {
		f = math.Abs(after/before - 1)
	}
	if after != 0 {
		b = math.Abs(before/after - 1)
	}
	return math.Max(f, b)
}

// Detect returns the change points of series in index order. Points are in
// time order (oldest first), one per night. A series with fewer than four
// points, or with a NaN or an infinity, has no change points.
func Detect(series []float64, opts Options) []ChangePoint {
	opts = opts.withDefaults()
	if len(series) < 4 {
		return nil
	}
	for _, v := range series {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
	}
	weak := split(series, opts.Window, firstPassP(opts.MaxP))
	return merge(weak, series, opts.MaxP, opts.MinMagnitude)
}

func (o Options) withDefaults() Options {
	if o.MaxP <= 0 {
		o.MaxP = DefaultOptions.MaxP
	}
	if o.MinMagnitude <= 0 {
		o.MinMagnitude = DefaultOptions.MinMagnitude
	}
	if o.Window < 4 {
		o.Window = DefaultOptions.Window
	}
	return o
}

// firstPassP is Otava's relaxed level for the split step: points that are
// only weakly significant are kept as candidates so that the merge step,
// which sees whole segments rather than windows, can decide.
func firstPassP(maxP float64) float64 {
	switch {
	case maxP < 0.05:
		return maxP * 10
	case maxP < 0.5:
		return maxP * 2
	default:
		return maxP
	}
}

// split runs E-divisive means over sliding windows and returns the union of
// the change points found, re-tested against the whole series.
func split(series []float64, window int, maxP float64) []ChangePoint {
	step := window / 2
	var idx []int
	seen := map[int]bool{}
	q := map[int]float64{}
	for start := 0; start < len(series); {
		end := min(start+window, len(series))
		found := divisive(series[start:end], maxP)
		last := 0
		for _, c := range found {
			i := c.Index + start
			if !seen[i] {
				seen[i] = true
				idx = append(idx, i)
				q[i] = c.Q
			}
			last = max(last, i)
		}
		start = max(last, start+step)
	}
	slices.Sort(idx)
	cps := make([]ChangePoint, len(idx))
	for k, i := range idx {
		lo, hi := neighbours(idx, k, len(series))
		cps[k] = test(series, lo, i, hi)
		cps[k].Q = q[i]
	}
	return cps
}

// merge drops weak change points until each remaining one has P ≤ maxP and
// Magnitude ≥ minMag, re-testing the neighbours of each one dropped (their
// segments grew).
func merge(cps []ChangePoint, series []float64, maxP, minMag float64) []ChangePoint {
	for len(cps) > 0 {
		weakest := 0
		for k, c := range cps {
			if c.P > cps[weakest].P {
				weakest = k
			}
		}
		if cps[weakest].P <= maxP {
			for k, c := range cps {
				if c.Magnitude() < cps[weakest].Magnitude() {
					weakest = k
				}
			}
			if cps[weakest].Magnitude() >= minMag {
				return cps
			}
		}
		cps = append(cps[:weakest], cps[weakest+1:]...)
		idx := indices(cps)
		for _, k := range []int{weakest - 1, weakest} {
			if k < 0 || k >= len(cps) {
				continue
			}
			lo, hi := neighbours(idx, k, len(series))
			q := cps[k].Q
			cps[k] = test(series, lo, cps[k].Index, hi)
			cps[k].Q = q
		}
	}
	return nil
}

// neighbours returns the segment bounds around change point k of the sorted
// indices idx: the previous change point (or 0) and the next (or n).
func neighbours(idx []int, k, n int) (lo, hi int) {
	lo, hi = 0, n
	if k > 0 {
		lo = idx[k-1]
	}
	if k+1 < len(idx) {
		hi = idx[k+1]
	}
	return lo, hi
}

func indices(cps []ChangePoint) []int {
	idx := make([]int, len(cps))
	for k, c := range cps {
		idx[k] = c.Index
	}
	return idx
}

// test compares series[lo:i] with series[i:hi].
func test(series []float64, lo, i, hi int) ChangePoint {
	left, right := series[lo:i], series[i:hi]
	r := welch(left, right)
	c := ChangePoint{
		Index:     i,
		Before:    r.mean1,
		After:     r.mean2,
		BeforeStd: r.sd1,
		AfterStd:  r.sd2,
		BeforeN:   len(left),
		AfterN:    len(right),
		P:         r.p,
	}
	if c.Before != 0 {
		c.RelChange = c.After/c.Before - 1
	}
	return c
}
