package changepoint

import "slices"

// divisive is E-divisive means over one window: it splits seg at the point
// with the largest q̂ over all current segments while that split is
// significant at maxP, and returns the change points found (indices into
// seg) in index order. Like Otava's detector it stops at the first candidate
// that is not significant.
func divisive(seg []float64, maxP float64) []ChangePoint {
	e := newEnergy(seg)
	var idx []int
	var found []ChangePoint
	for {
		bounds := append(append([]int{0}, idx...), len(seg))
		best, bestQ, bestLo, bestHi := -1, 0.0, 0, 0
		for k := 0; k+1 < len(bounds); k++ {
			lo, hi := bounds[k], bounds[k+1]
			if hi-lo < 2 {
				continue
			}
			tau, q := e.candidate(lo, hi)
			if best < 0 || q > bestQ {
				best, bestQ, bestLo, bestHi = tau, q, lo, hi
			}
		}
		if best < 0 {
			break
		}
		c := test(seg, bestLo, best, bestHi)
		if c.P > maxP {
			break
		}
		c.Q = bestQ
		found = append(found, c)
		idx = append(idx, best)
		slices.Sort(idx)
	}
	slices.SortFunc(found, func(a, b ChangePoint) int { return a.Index - b.Index })
	return found
}

// energy holds the pairwise distances |x_i − x_j| of one window as a 2-D
// prefix sum, so that the sum of distances between any two runs of the
// window costs O(1) and one candidate search over a segment of length L
// costs O(L²).
type energy struct {
	n int
	s []float64 // s[i*(n+1)+j] = Σ_{a<i, b<j} |x_a − x_b|
}

func newEnergy(x []float64) *energy {
	n := len(x)
	w := n + 1
	s := make([]float64, w*w)
	for i := 1; i <= n; i++ {
		row := 0.0
		for j := 1; j <= n; j++ {
			d := x[i-1] - x[j-1]
			if d < 0 {
				d = -d
			}
			row += d
			s[i*w+j] = s[(i-1)*w+j] + row
		}
	}
	return &energy{n: n, s: s}
}

// block is Σ_{a0≤a<a1, b0≤b<b1} |x_a − x_b|.
func (e *energy) block(a0, a1, b0, b1 int) float64 {
	w := e.n + 1
	return e.s[a1*w+b1] - e.s[a0*w+b1] - e.s[a1*w+b0] + e.s[a0*w+b0]
}

// candidate returns the split τ of the segment [lo, hi) that maximises
//
//	q̂(X, Y) = 2/(n+m) Σ|X_i − Y_j|
//	        − 2m/((n+m)(n−1)) Σ_{i<k} |X_i − X_k|
//	        − 2n/((n+m)(m−1)) Σ_{j<k} |Y_j − Y_k|
//
// over X = x[lo:τ] and Y = x[τ:κ] for lo < τ < κ ≤ hi (Matteson and James's
// statistic with exponent α = 1; a within-run term is 0 for a run of one
// point), and the maximum. As in Otava, ties go to the smallest τ, then the
// smallest κ.
func (e *energy) candidate(lo, hi int) (tau int, q float64) {
	tau, q = -1, 0
	for t := lo + 1; t < hi; t++ {
		n := float64(t - lo)
		within := e.block(lo, t, lo, t) / 2
		for k := t + 1; k <= hi; k++ {
			m := float64(k - t)
			v := 2 / (n + m) * e.block(lo, t, t, k)
			if n > 1 {
				v -= 2 * m / ((n + m) * (n - 1)) * within
			}
			if m > 1 {
				v -= 2 * n / ((n + m) * (m - 1)) * (e.block(t, k, t, k) / 2)
			}
			if tau < 0 || v > q {
				tau, q = t, v
			}
		}
	}
	return tau, q
}
