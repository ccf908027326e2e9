package stats

import (
	"fmt"
	"math"
	"slices"
	"strings"

	mstats "github.com/aclements/go-moremath/stats"
)

// Direction says which way a metric gets better. It is the one direction
// type of pgbisect: scenarios set it, Compare judges by it, and findings and
// their JSON reports carry it as these strings. The zero value is read as
// LowerIsBetter.
type Direction string

const (
	// LowerIsBetter is for times and latencies.
	LowerIsBetter Direction = "lower-is-better"
	// HigherIsBetter is for throughput such as transactions per second.
	HigherIsBetter Direction = "higher-is-better"
)

// String returns the words reports use: "lower is better" or "higher is
// better".
func (d Direction) String() string {
	if d == HigherIsBetter {
		return "higher is better"
	}
	return "lower is better"
}

// UnmarshalJSON reads a direction as written today ("lower-is-better",
// "higher-is-better", "" for unset) or as bisection states saved before
// there was one Direction type wrote it (0 lower, 1 higher is better).
func (d *Direction) UnmarshalJSON(data []byte) error {
	switch s := string(data); s {
	case "0":
		*d = LowerIsBetter
	case "1":
		*d = HigherIsBetter
	case `""`, "null":
		*d = ""
	case `"` + string(LowerIsBetter) + `"`, `"` + string(HigherIsBetter) + `"`:
		*d = Direction(s[1 : len(s)-1])
	default:
		return fmt.Errorf("direction %s: want %q or %q", s, LowerIsBetter, HigherIsBetter)
	}
	return nil
}

// Verdict is the outcome of a Comparison.
type Verdict int

const (
	// Unknown means not yet decided: take more samples (Thresholds.More).
	Unknown Verdict = iota
	// Same means the ratio of medians lies within MinEffect of 1 with the
	// requested confidence.
	Same
	// Regression means B is worse than A in the metric's direction.
	Regression
	// Improvement means B is better than A in the metric's direction.
	Improvement
	// Inconclusive means undecided with the sample budget spent.
	Inconclusive
)

func (v Verdict) String() string {
	switch v {
	case Unknown:
		return "unknown"
	case Same:
		return "same"
	case Regression:
		return "regression"
	case Improvement:
		return "improvement"
	case Inconclusive:
		return "inconclusive"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Different reports whether v is Regression or Improvement.
func (v Verdict) Different() bool { return v == Regression || v == Improvement }

// Decided reports whether the sampler should stop: anything but Unknown.
func (v Verdict) Decided() bool { return v != Unknown }

// Comparison is the decision about a baseline sample A and a candidate
// sample B, with its evidence.
type Comparison struct {
	Verdict   Verdict
	Direction Direction
	// A is the baseline (older, good) sample, B the candidate (newer).
	A, B Summary
	// Ratio estimates the ratio of B to A: the Hodges–Lehmann shift of the
	// log values, exp(median of log b - log a over all pairs), which is
	// median(B)/median(A) when B is A scaled. Lo and Hi bound its interval:
	// the intersection of the rank-based interval at this look's level
	// ShiftAlpha per side and the magnitude path's t interval at
	// MagnitudeAlpha per side, chosen so that the interval holds the true
	// ratio with probability at least Confidence at whatever look the
	// sampling stops. Before either can reach its level (too few runs, a
	// change small against the spread) Lo is 0 and Hi +Inf. All three are
	// NaN when a value is not positive.
	Ratio, Lo, Hi float64
	Confidence    float64
	// MedianRatio is median(B)/median(A), NaN when a median is not
	// positive.
	MedianRatio float64
	// ShiftAlpha is the one-sided level of the rank limits at this look.
	ShiftAlpha float64
	// PSame is the p-value of the rank equivalence test: the larger of the
	// one-sided Mann–Whitney p-values against a ratio at or below
	// 1-MinEffect and against one at or above 1+MinEffect (two one-sided
	// tests). PSame <= ShiftAlpha exactly when the rank interval lies inside
	// (1-MinEffect, 1+MinEffect); that, or the intersection [Lo, Hi] inside
	// it, is the Same verdict.
	PSame float64
	// PMagnitude is the two-sided p-value of the magnitude path, Student's t
	// test of the log values (each side's spread floored at the
	// measurement's resolution); 1 when the path is not used (a value not
	// positive, a look where the path does not look, or its interval
	// disjoint from the rank interval). The path finds a difference when
	// PMagnitude < 2·MagnitudeAlpha: its interval excludes 1.
	PMagnitude float64
	// MagnitudeAlpha is the one-sided level of the magnitude path's limits
	// at this look (Thresholds.MagnitudeAlpha), 0 at a look where the path
	// does not look.
	MagnitudeAlpha float64
	// PMannWhitney and PKS are two-sided p-values; P is the smaller (as
	// combined, see the package documentation), which is what LookAlpha is
	// compared against. When the magnitude path alone found the
	// difference, P is PMagnitude instead, so that reports show the
	// p-value of the test that decided.
	PMannWhitney, PKS, P float64
	// LookAlpha is the significance level of this look (Thresholds.LookAlpha).
	LookAlpha float64
	// MinEffect is the band used for Same.
	MinEffect float64
	// Warnings are caveats for the report, in plain words.
	Warnings []string
}

// Change is the relative change of the median, Ratio-1 (+0.10 = B's
// median is 10% higher).
func (c Comparison) Change() float64 { return c.Ratio - 1 }

// Worse is how much worse B is than A as a fraction, in the metric's
// direction: +0.10 means 10% slower (LowerIsBetter) or 10% less throughput
// (HigherIsBetter, 1 - Ratio), negative for an improvement. Rank culprits by
// it.
func (c Comparison) Worse() float64 {
	if c.Direction == HigherIsBetter {
		return 1 - c.Ratio
	}
	return c.Ratio - 1
}

// AtBudget returns c with an Unknown verdict turned into Inconclusive. The
// sampler calls it when it stops for a reason Compare cannot see, such as
// Thresholds.MaxTime.
func (c Comparison) AtBudget() Comparison {
	if c.Verdict == Unknown {
		c.Verdict = Inconclusive
		c.Warnings = append(slices.Clone(c.Warnings), "budget reached before a verdict")
	}
	return c
}

// Compare decides whether b differs from a for a metric with direction dir.
// It does not modify a or b. Zero fields of th take their defaults. A side
// with fewer than two values gives Unknown. When both sides have at least
// th.MaxSamples values an undecided comparison is Inconclusive.
func Compare(a, b []float64, dir Direction, th Thresholds) Comparison {
	th = th.WithDefaults()
	sa, sb := slices.Clone(a), slices.Clone(b)
	slices.Sort(sa)
	slices.Sort(sb)
	lookAlpha := th.LookAlpha(min(len(sa), len(sb)))
	c := Comparison{
		Direction:      dir,
		Ratio:          math.NaN(),
		Lo:             math.NaN(),
		Hi:             math.NaN(),
		MedianRatio:    math.NaN(),
		ShiftAlpha:     th.shiftAlpha(min(len(sa), len(sb))),
		PSame:          1,
		PMagnitude:     1,
		MagnitudeAlpha: th.MagnitudeAlpha(min(len(sa), len(sb))),
		Confidence:     th.Confidence,
		PMannWhitney:   1,
		PKS:            1,
		P:              1,
		LookAlpha:      lookAlpha,
		MinEffect:      th.MinEffect,
	}
	if len(sa) > 0 {
		c.A = summarizeSorted(sa)
	}
	if len(sb) > 0 {
		c.B = summarizeSorted(sb)
	}
	atBudget := len(sa) >= th.MaxSamples && len(sb) >= th.MaxSamples
	c.Warnings = sampleWarnings(c, sa, sb, th)
	if len(sa) < 2 || len(sb) < 2 {
		return c
	}
	if !allFinite(sa) || !allFinite(sb) {
		c.Warnings = append(c.Warnings, "values include NaN or infinity: no verdict")
		return c
	}
	if sa[0] > 0 && sb[0] > 0 {
		c.MedianRatio = c.B.Median / c.A.Median
		sh := shiftInterval(sa, sb, c.ShiftAlpha, th.MinEffect)
		c.Ratio, c.Lo, c.Hi, c.PSame = sh.ratio, sh.lo, sh.hi, sh.pSame
		if c.MagnitudeAlpha > 0 { // a look of the magnitude path
			mg := magnitudeInterval(sa, sb, c.MagnitudeAlpha, th.Resolution)
			if lo, hi := math.Max(c.Lo, mg.lo), math.Min(c.Hi, mg.hi); lo <= hi {
				c.Lo, c.Hi, c.PMagnitude = lo, hi, mg.p
			} else {
				c.Warnings = append(c.Warnings, "the t interval of the log values misses the rank interval (the runs are far from normal): judged by the rank tests alone")
			}
		}
	} else {
		c.Warnings = append(c.Warnings, "values are not all positive, so there is no ratio of medians and no verdict")
	}
	if u, err := mstats.MannWhitneyUTest(sa, sb, mstats.LocationDiffers); err == nil {
		c.PMannWhitney = u.P
	}
	_, c.PKS = KSTest(sa, sb)
	c.P = combineP(c.PMannWhitney, c.PKS)

	c.Verdict = decide(c)
	if c.Verdict.Different() && c.P >= lookAlpha {
		// The magnitude path decided alone: report its p-value.
		c.P = c.PMagnitude
	}
	if c.Verdict.Decided() {
		// A magnitude decision needs no particular number of runs.
		c.Warnings = slices.DeleteFunc(c.Warnings, func(w string) bool { return strings.HasPrefix(w, tooFewSamples) })
		if len(c.Warnings) == 0 {
			c.Warnings = nil // as when there was none, and as JSON gives it back
		}
	}
	if c.P < lookAlpha && c.PMannWhitney >= lookAlpha && !c.Verdict.Different() {
		c.Warnings = append(c.Warnings, fmt.Sprintf(
			"the distributions differ in shape or spread (KS p=%.2g) but not clearly in location (Mann-Whitney p=%.2g)",
			c.PKS, c.PMannWhitney))
	}
	if c.Verdict == Same && (c.P < lookAlpha || c.magnitudeDiffers()) {
		c.Warnings = append(c.Warnings, fmt.Sprintf(
			"a real change of %+.2g%% (p=%.2g) is smaller than min effect %.2g%%",
			100*c.Change(), min(c.P, c.PMagnitude), 100*th.MinEffect))
	}
	if c.Verdict == Unknown && atBudget {
		c.Verdict = Inconclusive
		c.Warnings = append(c.Warnings, fmt.Sprintf(
			"sample budget of %d per side reached before a verdict", th.MaxSamples))
	}
	return c
}

// magnitudeDiffers reports whether the magnitude path's interval excludes 1.
func (c Comparison) magnitudeDiffers() bool { return c.PMagnitude < 2*c.MagnitudeAlpha }

// decide applies the rules of the package documentation to the evidence.
func decide(c Comparison) Verdict {
	if math.IsNaN(c.Lo) {
		return Unknown
	}
	// The rank interval inside (1-MinEffect, 1+MinEffect), or the
	// intersection of both intervals; a limit at the edge, to rounding,
	// does not count as inside.
	const edge = 1e-9
	inside := c.Lo > (1-c.MinEffect)*(1+edge) && c.Hi < (1+c.MinEffect)*(1-edge)
	if c.PSame <= c.ShiftAlpha || inside {
		return Same
	}
	if c.P >= c.LookAlpha && !c.magnitudeDiffers() {
		return Unknown
	}
	var higher bool
	switch {
	case c.Lo > 1 && c.Ratio > 1:
		higher = true
	case c.Hi < 1 && c.Ratio < 1:
		higher = false
	default:
		return Unknown
	}
	if higher == (c.Direction != HigherIsBetter) { // "" is lower is better
		return Regression
	}
	return Improvement
}

const tooFewSamples = "too few samples"

// sampleWarnings describes problems of the samples themselves.
func sampleWarnings(c Comparison, sa, sb []float64, th Thresholds) []string {
	var w []string
	if need := MinSamples(c.LookAlpha); len(sa) < need || len(sb) < need {
		w = append(w, fmt.Sprintf(
			tooFewSamples+" (n=%d+%d): at least %d per side are needed before a rank test can be significant",
			len(sa), len(sb), need))
	}
	for _, side := range []struct {
		name string
		s    Summary
		xs   []float64
	}{{"baseline", c.A, sa}, {"candidate", c.B, sb}} {
		if side.s.N > 1 && side.s.RelStddev > th.NoisyRelStddev {
			w = append(w, fmt.Sprintf("%s is noisy: relative stddev %.1f%% is above %.0f%%",
				side.name, 100*side.s.RelStddev, 100*th.NoisyRelStddev))
		}
		if bimodal(side.xs) {
			w = append(w, fmt.Sprintf("%s looks bimodal: its values form two separate groups", side.name))
		}
	}
	return w
}

// Bimodal reports whether xs (in any order) form two separate groups, as
// bimodal defines them.
func Bimodal(xs []float64) bool {
	s := slices.Clone(xs)
	slices.Sort(s)
	return bimodal(s)
}

// bimodal reports whether sorted xs splits into two groups, each with at
// least a fifth of the values (and at least three), separated by a gap wider
// than the range of either group. Under a unimodal distribution such a gap in
// the middle of the sample is very unlikely.
func bimodal(xs []float64) bool {
	n := len(xs)
	least := max(3, (n+4)/5)
	for i := least; i <= n-least; i++ {
		gap := xs[i] - xs[i-1]
		if gap > xs[i-1]-xs[0] && gap > xs[n-1]-xs[i] {
			return true
		}
	}
	return false
}

func allFinite(xs []float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}
