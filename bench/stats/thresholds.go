package stats

import (
	"math"
	"time"
)

// Thresholds holds the tunables of a comparison. Zero fields take the value
// of DefaultThresholds (see WithDefaults), so a partially filled struct from a
// config file or flags is valid.
type Thresholds struct {
	// Alpha is the family-wise rate of a false "different" verdict across all
	// looks of one comparison, in (0, 0.5). Default 0.01.
	Alpha float64
	// Confidence is the level of the interval of the ratio, in (0, 1),
	// holding over all looks: the interval at the look where sampling stops
	// holds the true ratio with at least this probability, and a true
	// change of exactly MinEffect is called "same" with probability at most
	// (1-Confidence)/2. Default 0.95.
	Confidence float64
	// MinEffect is the smallest relative change that matters, as a fraction
	// (0.03 = 3%). "Same" requires the interval inside [1-MinEffect,
	// 1+MinEffect]. Default 0.03.
	MinEffect float64
	// StartSamples is the number of runs per side of the first planned
	// look (Looks). Default 5. The sampler looks once before it, at
	// FirstLook (3) runs per side, where only the magnitude path can
	// decide.
	StartSamples int
	// Batch is the number of runs per side added after an Unknown look.
	// Default 5.
	Batch int
	// MaxSamples is the budget of runs per side; an undecided comparison at
	// the budget is Inconclusive. Default 30.
	MaxSamples int
	// MaxTime is a wall-clock budget for one comparison, enforced by the
	// sampler (see Comparison.AtBudget). Default 0: none.
	MaxTime time.Duration
	// Resamples was the number of bootstrap resamples of the interval,
	// which is now rank-based; it is kept so that saved thresholds (a
	// bisection's state) keep their meaning, and is not used. Default 2000.
	Resamples int
	// Resolution is the unit of the measurement in the metric's own units:
	// 1 for a count such as instructions executed, the tick of a clock.
	// It floors each side's spread in the magnitude path (see
	// MagnitudeAlpha), so that samples with no spread at all, as counts
	// often are, still get a finite interval. Default 0: unknown, taken as
	// the smallest gap between two distinct values of the samples.
	Resolution float64
	// NoisyRelStddev is the relative standard deviation (a fraction) above
	// which a side is flagged as noisy. Default 0.10.
	NoisyRelStddev float64
}

// DefaultThresholds holds the defaults applied to zero fields of Thresholds.
var DefaultThresholds = Thresholds{
	Alpha:          0.01,
	Confidence:     0.95,
	MinEffect:      0.03,
	StartSamples:   5,
	Batch:          5,
	MaxSamples:     30,
	Resamples:      2000,
	NoisyRelStddev: 0.10,
}

// WithDefaults returns th with every zero or out-of-range field replaced by
// its DefaultThresholds value.
func (th Thresholds) WithDefaults() Thresholds {
	d := DefaultThresholds
	if !(th.Alpha > 0 && th.Alpha < 0.5) {
		th.Alpha = d.Alpha
	}
	if !(th.Confidence > 0 && th.Confidence < 1) {
		th.Confidence = d.Confidence
	}
	if !(th.MinEffect > 0 && th.MinEffect < 1) {
		th.MinEffect = d.MinEffect
	}
	if th.StartSamples <= 0 {
		th.StartSamples = d.StartSamples
	}
	if th.Batch <= 0 {
		th.Batch = d.Batch
	}
	if th.MaxSamples <= 0 {
		th.MaxSamples = d.MaxSamples
	}
	if th.MaxSamples < th.StartSamples {
		th.MaxSamples = th.StartSamples
	}
	if th.Resamples <= 0 {
		th.Resamples = d.Resamples
	}
	if !(th.Resolution > 0) || math.IsInf(th.Resolution, 0) {
		th.Resolution = 0
	}
	if th.NoisyRelStddev <= 0 {
		th.NoisyRelStddev = d.NoisyRelStddev
	}
	return th
}

// Looks returns the planned sample sizes per side at which the sampler looks:
// StartSamples, StartSamples+Batch, ..., ending with MaxSamples.
func (th Thresholds) Looks() []int {
	th = th.WithDefaults()
	var ns []int
	for n := th.StartSamples; n < th.MaxSamples; n += th.Batch {
		ns = append(ns, n)
	}
	return append(ns, th.MaxSamples)
}

// LookAlpha returns the significance level that P is compared against at a
// look with n values per side (the smaller side). Looks between planned sizes
// use the level of the planned look at or below n; before the first planned
// look, that of the first. See the package documentation for how the levels
// are calibrated.
func (th Thresholds) LookAlpha(n int) float64 {
	th = th.WithDefaults()
	looks, alphas := th.Looks(), th.lookAlphas()
	k := 0
	for i, look := range looks {
		if look <= n {
			k = i
		}
	}
	return alphas[k]
}

// MinSamples returns the smallest n per side at which a two-sided rank test
// can reach p <= alpha (complete separation of the two samples).
func MinSamples(alpha float64) int {
	for n := 1; n < 1000; n++ {
		if minRankP(n, n) <= alpha {
			return n
		}
	}
	return 1000
}

// minRankP is the smallest two-sided p-value of the Mann–Whitney and
// Kolmogorov–Smirnov tests for samples of sizes m and n without ties:
// the probability 2/C(m+n, m) of complete separation in either direction.
func minRankP(m, n int) float64 {
	lg, _ := math.Lgamma(float64(m + n + 1))
	la, _ := math.Lgamma(float64(m + 1))
	lb, _ := math.Lgamma(float64(n + 1))
	return math.Min(1, 2*math.Exp(-(lg-la-lb)))
}

// More returns how many runs to add per side before the next look: 0 when c
// is decided or the budget is reached. The count brings the smaller side up
// to the next planned look (after the first look at FirstLook runs per
// side, StartSamples).
func (th Thresholds) More(c Comparison) int {
	if c.Verdict != Unknown {
		return 0
	}
	n := min(c.A.N, c.B.N)
	for _, look := range th.Looks() {
		if look > n {
			return look - n
		}
	}
	return 0
}

// Look is the rule of every sequential comparison's look (bench's
// sampling loop and the bisection planner): with c the comparison so far,
// how many more runs each side takes before the next look (More), and c
// as it stands when there are none: an undecided comparison whose budget
// is spent, or whose time is up (overTime), is Inconclusive (AtBudget).
func (th Thresholds) Look(c Comparison, overTime bool) (Comparison, int) {
	if overTime {
		return c.AtBudget(), 0
	}
	if more := th.More(c); more > 0 {
		return c, more
	}
	return c.AtBudget(), 0
}
