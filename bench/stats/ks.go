package stats

import "math"

// ksExactLimit is the largest m+n for which KSTest counts lattice paths;
// above it the asymptotic Kolmogorov distribution is used.
const ksExactLimit = 1000

// KSTest is the two-sided two-sample Kolmogorov–Smirnov test of x and y,
// which must be sorted ascending. It returns the statistic
// D = max |F_x(t) - F_y(t)| and its p-value P(D >= observed).
//
// For m+n <= 1000 the p-value is exact under the permutation null
// hypothesis, conditional on the pattern of ties: it counts the label
// orderings of the pooled sample whose D reaches the observed one, checking
// the empirical distribution functions only where the pooled values change,
// as in Hodges (1958), "The significance probability of the Smirnov
// two-sample test", Arkiv för Matematik 3, and R's psmirnov(exact=TRUE).
func KSTest(x, y []float64) (d, p float64) {
	m, n := len(x), len(y)
	if m == 0 || n == 0 {
		return 0, 1
	}
	// Pooled order with labels; boundary[k] reports whether the ECDFs are
	// compared after the first k pooled values (a tie block ends there).
	N := m + n
	fromX := make([]bool, N)
	boundary := make([]bool, N+1)
	i, j, dmax := 0, 0, 0
	for k := 0; k < N; k++ {
		var v float64
		if j >= n || (i < m && x[i] <= y[j]) {
			v, fromX[k] = x[i], true
			i++
		} else {
			v = y[j]
			j++
		}
		next := math.Inf(1)
		if i < m {
			next = x[i]
		}
		if j < n && y[j] < next {
			next = y[j]
		}
		if k == N-1 || next != v {
			boundary[k+1] = true
			// Compare i/m and j/n as integers: |i*n - j*m|.
			dmax = max(dmax, abs(i*n-j*m))
		}
	}
	d = float64(dmax) / float64(m*n)
	if dmax == 0 {
		return 0, 1
	}
	if N > ksExactLimit {
		return d, ksAsymptotic(d, m, n)
	}
	return d, ksPValue(m, n, dmax, boundary)
}

// ksPValue is P(max |i*n - j*m| >= dmax) over the boundaries k = i+j where
// boundary[k] is true (all of them when boundary is nil), for a uniformly
// random ordering of m values of x and n of y.
func ksPValue(m, n, dmax int, boundary []bool) float64 {
	N := m + n
	// Fraction of paths from (0,0) to (m,n) that never reach |i*n-j*m| >=
	// dmax at a boundary. Probabilities rather than counts keep the numbers
	// in range: each step takes an x with probability (m-i)/(N-k).
	u := make([]float64, n+1) // u[j]: probability of being at (i, j) unharmed
	u[0] = 1
	hit := 0.0 // probability of first reaching the boundary, summed
	for i := 0; i <= m; i++ {
		for j := 0; j <= n; j++ {
			if i == 0 && j == 0 {
				continue
			}
			prob := 0.0
			if i > 0 {
				// from (i-1, j) with an x step
				prob += u[j] * float64(m-i+1) / float64(N-i-j+1)
			}
			if j > 0 {
				// from (i, j-1) with a y step
				prob += u[j-1] * float64(n-j+1) / float64(N-i-j+1)
			}
			if (boundary == nil || boundary[i+j]) && abs(i*n-j*m) >= dmax {
				hit += prob
				prob = 0
			}
			u[j] = prob
		}
	}
	// Summing the absorbed probability rather than taking 1-u[n] keeps
	// small p-values accurate.
	return math.Min(1, hit)
}

// ksAsymptotic is the limiting Kolmogorov distribution with Stephens's
// small-sample correction (Numerical Recipes, probks).
func ksAsymptotic(d float64, m, n int) float64 {
	en := math.Sqrt(float64(m) * float64(n) / float64(m+n))
	lambda := (en + 0.12 + 0.11/en) * d
	sum, sign := 0.0, 1.0
	for k := 1; k <= 100; k++ {
		term := sign * 2 * math.Exp(-2*lambda*lambda*float64(k*k))
		sum += term
		if math.Abs(term) < 1e-12 {
			return math.Min(1, math.Max(sum, 0))
		}
		sign = -sign
	}
	return 1
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
