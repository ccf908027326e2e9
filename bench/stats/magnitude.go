package stats

import (
	"math"
	"slices"

	"github.com/aclements/go-moremath/mathx"
	mstats "github.com/aclements/go-moremath/stats"
)

// The magnitude path: a Student t interval of the shift between the log
// values of the two samples, which uses how far apart the runs are and not
// only their order. Rank tests cannot decide early: at 5 runs per side the
// smallest two-sided p of any rank test is 2/C(10,5) = 0.0079, at 3 runs
// 0.1, however large the change. A t interval can, when the change is many
// times the spread, as it is for a 2× slowdown at 10% noise or for a 0.5%
// change of an instruction count whose runs differ by 0.01%.
//
// The variance is pooled, with n_A+n_B-2 degrees of freedom: under both
// cases the interval must hold in, no change (the runs of A and B
// exchangeable) and a multiplicative change (B distributed as r·A), the
// two sides' log values have the same spread, so Welch's correction for
// unequal spreads would only cost power (with equal sizes the statistic is
// Welch's).
//
// It gets a small share of the error rates (magnitudeShare) and the rank
// path the rest, so that the union bound holds the totals:
//
//   - a false "different" from either path, over all looks, at most Alpha;
//   - an interval (the intersection of both) that misses the true ratio on
//     one side, over all looks, at most (1-Confidence)/2.
//
// It looks only where the rank tests cannot decide: the first look (3 runs
// per side) and the planned looks before the first at which a rank test
// can reach its level (5 runs per side with the defaults; from 10 on the
// rank tests decide alone). Its share is split over those looks, a quarter
// to the first, and scaled by magnitudeCalibration: with the defaults the
// interval's one-sided level is 3.1e-5 at 3 runs per side and 9.4e-5 at 5,
// levels only an overwhelming difference reaches (17.5 and 6.5 standard
// errors; a bisection's alpha 0.05 gives 11.6 and 5.1). Student's t is exact for normal log values only; the
// calibration and the seeded simulation (sim.go, TestMagnitudeNullRate)
// hold the path's false "different" rate within its share in every noise
// model, heavy tails, outliers, two modes, autocorrelation, drift and tied
// data included.
//
// Zero spread would divide by zero, so each side's variance of log values
// is at least that of rounding to the measurement's resolution r, (r/m)²/12
// for a side of mean m: the resolution the metric declares
// (Thresholds.Resolution, 1 for a count), or else the smallest gap between
// two distinct values of the two samples pooled. Identical values on both
// sides give the ratio 1 and the interval [1, 1].

// magnitudeShare is the share of Alpha and of (1-Confidence)/2 given to the
// magnitude path; the rank tests and the rank interval get the rest.
const magnitudeShare = 0.1

// magnitudeCalibration scales the Student t levels of the magnitude path
// so that its false "different" rate stays within its share of Alpha in
// every noise model of sim.go, not only under normal log values. The model
// that needs it is the bimodal one: three runs of A in the fast mode and
// three of B in the slow one (probability 2·0.7³·0.3³ = 1.9%) look like a
// shift of 1.9 stddevs with little spread on either side, and at the
// nominal levels the path's rate there is 2.3 times its share. At a
// quarter of the nominal level its rate is at most 0.085% for the default
// Alpha 1% (share 0.1%) and 0.25% for a bisection's 5% (share 0.5%), in
// 100,000 A/A comparisons at each of 0.01%, 2%, 5%, 10% and 15% noise;
// every other model stays further below (TestMagnitudeNullRate checks them
// all; docs/statistics.md has the table).
const magnitudeCalibration = 0.25

// firstLook is the size per side of the first look when StartSamples is
// larger: there only the magnitude path can decide.
const firstLook = 3

// FirstLook returns the number of runs per side of the first look:
// min(3, StartSamples). The sampler takes these first; at 3 runs per side
// only the magnitude path can decide (a difference of 17.5 standard errors
// or more with the defaults, see MagnitudeAlpha), so the data decide
// whether the first decision comes at 3 runs or later. More plans
// StartSamples next.
func (th Thresholds) FirstLook() int {
	th = th.WithDefaults()
	return min(firstLook, th.StartSamples)
}

// MagnitudeAlpha returns the one-sided level of the magnitude path's
// interval at a look with n runs per side (the smaller side), 0 where the
// path does not look (also at sizes between its looks). It looks where the rank tests cannot reach their
// level (2/C(2n, n) above LookAlpha(n)): the first look and, with the
// defaults, the look at StartSamples, 3 and 5 runs per side. There its
// share, magnitudeShare of the smaller of Alpha/2 and (1-Confidence)/2
// scaled by magnitudeCalibration, is split: a quarter to the first look,
// the rest evenly to the others (Bonferroni). From the first look at which
// a rank test can decide, the rank tests decide alone.
func (th Thresholds) MagnitudeAlpha(n int) float64 {
	th = th.WithDefaults()
	looks := th.magnitudeLooks()
	k := slices.Index(looks, n)
	if k < 0 {
		return 0
	}
	level := magnitudeCalibration * magnitudeShare * math.Min(th.Alpha/2, shiftLevel(th.Confidence))
	if len(looks) == 1 {
		return level
	}
	if k == 0 {
		return firstLookWeight * level
	}
	return (1 - firstLookWeight) * level / float64(len(looks)-1)
}

// firstLookWeight is the first look's part of the magnitude path's level
// when it has later looks: a quarter, enough for near-deterministic data,
// whose changes are hundreds of standard errors, the rest for the look at
// StartSamples, where changes of a few times the noise are decided.
const firstLookWeight = 0.25

// magnitudeLooks returns the looks of the magnitude path: the first look
// and every planned look up to the first at which a rank test can reach
// its level.
func (th Thresholds) magnitudeLooks() []int {
	looks := []int{th.FirstLook()}
	for _, n := range th.Looks() {
		if minRankP(n, n) <= th.LookAlpha(n) {
			break
		}
		if n > looks[0] {
			looks = append(looks, n)
		}
	}
	return looks
}

// magnitude is the Student t interval of the shift of log b over log a.
type magnitude struct {
	ratio  float64 // exp of the difference of the mean logs
	lo, hi float64 // limits at the one-sided level alpha each
	p      float64 // two-sided p-value of no change
	df     float64 // degrees of freedom, na+nb-2
}

// magnitudeInterval computes the magnitude path for sorted positive a and b
// (at least two values each) at one-sided level alpha. resolution is the
// metric's declared unit, 0 when unknown.
func magnitudeInterval(a, b []float64, alpha, resolution float64) magnitude {
	d, se, df := magnitudeT(a, b, resolution)
	if se == 0 { // every value of both sides is the same
		return magnitude{ratio: 1, lo: 1, hi: 1, p: 1, df: df}
	}
	crit := tQuantile(df, 1-alpha)
	return magnitude{
		ratio: math.Exp(d),
		lo:    math.Exp(d - crit*se),
		hi:    math.Exp(d + crit*se),
		p:     tTwoSided(d/se, df),
		df:    df,
	}
}

// magnitudeT returns the difference of the mean logs of b and a, its
// standard error (0 only when every value of both is the same) and the
// degrees of freedom.
func magnitudeT(a, b []float64, resolution float64) (d, se, df float64) {
	if !(resolution > 0) {
		resolution = smallestGap(a, b)
	}
	ma, va := meanVarLog(a, resolution)
	mb, vb := meanVarLog(b, resolution)
	na, nb := float64(len(a)), float64(len(b))
	df = na + nb - 2
	return mb - ma, math.Sqrt(((na-1)*va + (nb-1)*vb) / df * (1/na + 1/nb)), df
}

// tTwoSided returns P(|T| >= |t|) for Student's t with df degrees of
// freedom, I_{df/(df+t²)}(df/2, 1/2), without the cancellation of 1 - CDF
// in the far tail.
func tTwoSided(t, df float64) float64 {
	return math.Min(1, mathx.BetaInc(df/(df+t*t), df/2, 0.5))
}

// meanVarLog returns the mean and the sample variance of the logs of xs,
// the variance at least that of rounding xs to the resolution r, in logs
// (r/mean)²/12.
func meanVarLog(xs []float64, r float64) (mean, v float64) {
	// Deviations from the first value, so that identical values give
	// exactly their log and a variance of exactly 0.
	l0, dev, lin := math.Log(xs[0]), 0.0, 0.0
	for _, x := range xs {
		dev += math.Log(x) - l0
		lin += x
	}
	n := float64(len(xs))
	dev /= n
	mean, lin = l0+dev, lin/n
	for _, x := range xs {
		e := math.Log(x) - l0 - dev
		v += e * e
	}
	v /= n - 1
	rel := r / lin
	return mean, math.Max(v, rel*rel/12)
}

// smallestGap returns the smallest positive difference between two values
// of sorted a and b pooled: the measurement's resolution as far as the data
// show it; 0 when all values are equal.
func smallestGap(a, b []float64) float64 {
	all := append(slices.Clone(a), b...)
	slices.Sort(all)
	gap := 0.0
	for i := 1; i < len(all); i++ {
		if g := all[i] - all[i-1]; g > 0 && (gap == 0 || g < gap) {
			gap = g
		}
	}
	return gap
}

// tQuantile returns the p-quantile (p > 0.5) of Student's t with df degrees
// of freedom, by bisection of its distribution function.
func tQuantile(df, p float64) float64 {
	t := mstats.TDist{V: df}
	lo, hi := 0.0, 1.0
	for t.CDF(hi) < p {
		lo, hi = hi, 2*hi
		if hi > 1e12 {
			return math.Inf(1)
		}
	}
	for range 100 {
		mid := (lo + hi) / 2
		if t.CDF(mid) < p {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo <= 1e-10*hi {
			break
		}
	}
	return hi
}
