package stats

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// RecoverBound is the lower bound of the recovered fraction's interval at
// or above which a revert is said to recover a regression: with 95%
// confidence, the revert undoes at least half of it.
const RecoverBound = 0.5

// Effect is a measured ratio B/A with its interval at a two-sided
// confidence Level, as a Comparison or a report carries it, and Base, the
// median of A (0 when unknown).
type Effect struct {
	Ratio, Lo, Hi float64
	Level         float64
	Base          float64
}

// EffectOf returns c's ratio, interval and A's median.
func EffectOf(c Comparison) Effect {
	return Effect{Ratio: c.Ratio, Lo: c.Lo, Hi: c.Hi, Level: c.Confidence, Base: c.A.Median}
}

// Recovery is how much of a regression a revert undoes.
type Recovery struct {
	// Fraction is the share of the regression undone, in the metric's
	// own units when both bases are known: (BAD - reverted) / (culprit -
	// parent), the time a revert takes off over the time the culprit
	// added. Otherwise on the log scale: log(BAD/reverted) /
	// log(culprit/parent). 1 undoes all of it, 0 nothing, above 1 more
	// than the regression cost, below 0 makes it worse still.
	Fraction float64 `json:"fraction"`
	// Lo and Hi bound Fraction at Confidence; -Inf and +Inf when an input
	// has no interval.
	Lo         float64 `json:"lo"`
	Hi         float64 `json:"hi"`
	Confidence float64 `json:"confidence"`
	// Recovers is Lo >= RecoverBound.
	Recovers bool `json:"recovers"`
	// Warnings are caveats in plain words.
	Warnings []string `json:"warnings,omitempty"`
}

// Recovered estimates the fraction of a regression that a revert recovers,
// with its interval at confidence (0.95 when 0). regression is the
// culprit against its parent (A parent, B culprit), or the bad endpoint
// against the good one for all culprits at once; revert is the reverted
// build against the build it was reverted on (A BAD, B BAD with the
// culprit reverted). Either direction of metric works: a regression that
// raises a time has a ratio above 1, and a revert that recovers it one
// below 1, and the fraction is the same for throughput with both
// reversed.
//
// Scale: two culprits' costs usually add up (per-row work in COPY, per
// digit in parsing), so a culprit's share of the bad build's time is
// smaller than its share of its parent's. On the log scale the revert of
// the first of two such culprits would seem to recover only part of its
// regression (47% in the demo, whose second culprit costs more), on the
// metric's own scale all of it. So when both Effects carry their Base
// (EffectOf does), the fraction is taken in the metric's units:
// f = B·(1 - e^-y) / (P·(e^x - 1)), x = log(regression), y =
// -log(revert), P and B the two Bases (parent and BAD medians, taken as
// known: the ratios' intervals carry the noise), with the delta method's
// interval from the log ratios' standard errors.
//
// Log-scale method: the ratio of the two log ratios, a / b with a = -log(revert)
// and b = log(regression). Each log ratio's standard error is read off
// its interval as if it were normal (half its width over the normal
// quantile of its level), and the fraction's interval is the delta
// method's, f ± z·sqrt(se_a² + f²·se_b²)/|b|. The two measurements are
// independent (different runs). The delta method is rough when the
// regression's own interval reaches near 1: then a warning says so, and
// when it reaches 1 the fraction has no interval at all.
func Recovered(regression, revert Effect, confidence float64) Recovery {
	if !(confidence > 0 && confidence < 1) {
		confidence = 0.95
	}
	rec := Recovery{Fraction: math.NaN(), Lo: math.Inf(-1), Hi: math.Inf(1), Confidence: confidence}
	if !(regression.Ratio > 0) || !(revert.Ratio > 0) {
		rec.Warnings = append(rec.Warnings, "a ratio is missing: a median was not positive")
		return rec
	}
	b := math.Log(regression.Ratio)
	a := -math.Log(revert.Ratio)
	if b == 0 {
		rec.Warnings = append(rec.Warnings, "the regression's ratio is exactly 1: there is nothing to recover")
		return rec
	}
	rec.Fraction = a / b
	abs := regression.Base > 0 && revert.Base > 0
	k, eb := 0.0, math.Exp(b)
	if abs {
		// In the metric's units: f = k·(1 - e^-a)/(e^b - 1), k = B/P.
		k = revert.Base / regression.Base
		rec.Fraction = k * (1 - math.Exp(-a)) / (eb - 1)
	}
	seA, okA := logSE(revert)
	seB, okB := logSE(regression)
	if !okA || !okB {
		rec.Warnings = append(rec.Warnings, "too few runs for an interval of the recovered fraction")
		return rec
	}
	if !(regression.Lo > 1 || regression.Hi < 1) {
		rec.Warnings = append(rec.Warnings, "the regression's own interval includes no change: the recovered fraction has no interval")
		return rec
	}
	z := distuv.UnitNormal.Quantile(1 - (1-confidence)/2)
	se := math.Sqrt(seA*seA+rec.Fraction*rec.Fraction*seB*seB) / math.Abs(b)
	if abs {
		dA := k * math.Exp(-a) / (eb - 1)
		dB := -rec.Fraction * eb / (eb - 1)
		se = math.Sqrt(dA*dA*seA*seA + dB*dB*seB*seB)
	}
	rec.Lo, rec.Hi = rec.Fraction-z*se, rec.Fraction+z*se
	rec.Recovers = rec.Lo >= RecoverBound
	if math.Abs(b)/seB < 3 {
		rec.Warnings = append(rec.Warnings, "the regression is less than three standard errors from no change: the interval is rough")
	}
	return rec
}

// logSE is the standard error of log(e.Ratio) implied by its interval.
func logSE(e Effect) (float64, bool) {
	if !(e.Lo > 0) || math.IsInf(e.Hi, 0) || !(e.Hi >= e.Lo) || !(e.Level > 0 && e.Level < 1) {
		return 0, false
	}
	z := distuv.UnitNormal.Quantile(1 - (1-e.Level)/2)
	return (math.Log(e.Hi) - math.Log(e.Lo)) / (2 * z), true
}
