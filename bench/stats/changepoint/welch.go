package changepoint

import (
	"math"

	"gonum.org/v1/gonum/mathext"
)

// welchResult is Welch's two-sample t-test with the sides' summaries.
type welchResult struct {
	mean1, mean2 float64
	sd1, sd2     float64 // sample standard deviations (n−1 denominator)
	p            float64 // two-sided
}

// welch tests whether a and b have the same mean without assuming equal
// variances. A side with fewer than two points has no variance estimate and
// gives p = 1. Two constant sides give p = 0 when their means differ and 1
// when they are equal.
func welch(a, b []float64) welchResult {
	var r welchResult
	r.p = 1
	if len(a) == 0 || len(b) == 0 {
		return r
	}
	m1, v1 := meanVar(a)
	m2, v2 := meanVar(b)
	r.mean1, r.mean2 = m1, m2
	r.sd1, r.sd2 = math.Sqrt(v1), math.Sqrt(v2)
	if len(a) < 2 || len(b) < 2 {
		return r
	}
	n1, n2 := float64(len(a)), float64(len(b))
	s1, s2 := v1/n1, v2/n2
	se2 := s1 + s2
	if se2 == 0 {
		if m1 != m2 {
			r.p = 0
		}
		return r
	}
	t := (m2 - m1) / math.Sqrt(se2)
	df := se2 * se2 / (s1*s1/(n1-1) + s2*s2/(n2-1))
	// Two-sided tail of Student's t: I_{df/(df+t²)}(df/2, 1/2).
	r.p = mathext.RegIncBeta(df/2, 0.5, df/(df+t*t))
	return r
}

func meanVar(x []float64) (mean, variance float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	if len(x) < 2 {
		return mean, 0
	}
	for _, v := range x {
		d := v - mean
		variance += d * d
	}
	return mean, variance / float64(len(x)-1)
}
