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
// confidence Level, as a Comparison or a report carries it.
type Effect struct {
	Ratio, Lo, Hi float64
	Level         float64
}

// EffectOf returns c's ratio and interval.
func EffectOf(c Comparison) Effect {
	return Effect{Ratio: c.Ratio, Lo: c.Lo, Hi: c.Hi, Level: c.Confidence}
}

// Recovery is how much of a regression a revert undoes.
type Recovery struct {
	// Fraction is the share of the regression undone, on the log scale:
	// log(BAD/reverted) / log(culprit/parent). 1 undoes all of it, 0
	// nothing, above 1 more than the regression cost, below 0 makes it
	// worse still.
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
// Method: the ratio of the two log ratios, a / b with a = -log(revert)
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
