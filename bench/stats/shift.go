package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// The effect and its interval: a Hodges–Lehmann estimate of the shift
// between the logarithms of the two samples, with the distribution-free
// confidence limits that invert the Mann–Whitney test (Lehmann 1963;
// Hollander and Wolfe 1973, §4.3). In log values a multiplicative change
// B = r·A is a shift by log r, so the estimate exp(HL) is a ratio.
//
// For samples x (log A, m values) and y (log B, n values) let d be the m·n
// differences y_j - x_i, sorted. When y is x shifted by δ (whatever the
// distribution), the count of d at or below δ has the null distribution of
// the Mann–Whitney U, so [d_(c), d_(mn+1-c)] with c the number of u for
// which P(U <= u) <= a misses δ on each side with probability at most a.
// Because that holds for every δ, the limits can be checked at every look
// with levels from one null simulation, exactly as the boundary of the
// rank tests (boundary.go): the repeated confidence intervals of
// Jennison and Turnbull (1989), rank-based.

// mwExactLimit is the largest sample size per side for which the null
// distribution of U is computed exactly; beyond it the normal
// approximation with continuity correction is used, as go-moremath does.
const mwExactLimit = 50

type mwKey struct{ m, n int }

var mwCDFs sync.Map // mwKey -> []float64

// mwCDF returns F with F[u] = P(U <= u), u = 0..m·n, for the Mann–Whitney
// count U of samples of m and n values without ties under the null
// hypothesis.
func mwCDF(m, n int) []float64 {
	if m > n {
		m, n = n, m // U's distribution is symmetric in the sizes
	}
	key := mwKey{m, n}
	if v, ok := mwCDFs.Load(key); ok {
		return v.([]float64)
	}
	mn := m * n
	cdf := make([]float64, mn+1)
	if n > mwExactLimit {
		mu := float64(mn) / 2
		sigma := math.Sqrt(float64(mn) * float64(m+n+1) / 12)
		for u := range cdf {
			cdf[u] = 0.5 * math.Erfc(-(float64(u)+0.5-mu)/sigma/math.Sqrt2)
		}
	} else {
		// prev[j][u] counts the orderings of i-1 values of x and j of y
		// with U = u (U counts, for each x, the ys below it); the last of
		// i values of x and j of y is either an x, adding j to U, or a y.
		prev := make([][]float64, n+1)
		cur := make([][]float64, n+1)
		for j := range prev {
			prev[j] = make([]float64, mn+1)
			cur[j] = make([]float64, mn+1)
			prev[j][0] = 1
		}
		for i := 1; i <= m; i++ {
			for j := 0; j <= n; j++ {
				row := cur[j]
				clear(row)
				for u := j; u <= mn; u++ {
					row[u] = prev[j][u-j]
				}
				if j > 0 {
					for u, c := range cur[j-1] {
						row[u] += c
					}
				}
			}
			prev, cur = cur, prev
		}
		total, acc := 0.0, 0.0
		for _, c := range prev[n] {
			total += c
		}
		for u, c := range prev[n] {
			acc += c
			cdf[u] = math.Min(1, acc/total)
		}
	}
	v, _ := mwCDFs.LoadOrStore(key, cdf)
	return v.([]float64)
}

// cutCount returns c, the number of counts u with P(U <= u) <= a: the
// interval at one-sided level a is [d_(c), d_(mn+1-c)] (1-based), and
// c = 0 means no finite limit reaches that level.
func cutCount(cdf []float64, a float64) int {
	c, _ := slices.BinarySearchFunc(cdf, a, func(p, a float64) int {
		if p <= a {
			return -1
		}
		return 1
	})
	return min(c, len(cdf)/2) // the limits never cross
}

// shift is the Hodges–Lehmann estimate and interval of a comparison.
type shift struct {
	ratio, lo, hi float64 // exp of the estimate and of the limits
	// pSame is the larger one-sided p-value of the two tests that the
	// ratio is below 1+minEffect and above 1-minEffect (TOST).
	pSame float64
}

// shiftInterval computes the shift of log b over log a for sorted positive
// a and b, with limits at one-sided level alpha each.
func shiftInterval(a, b []float64, alpha, minEffect float64) shift {
	la, lb := logs(a), logs(b)
	d := make([]float64, 0, len(a)*len(b))
	for _, y := range lb {
		for _, x := range la {
			d = append(d, y-x)
		}
	}
	slices.Sort(d)
	cdf := mwCDF(len(a), len(b))
	s := shift{ratio: math.Exp(medianSorted(d)), lo: 0, hi: math.Inf(1)}
	if c := cutCount(cdf, alpha); c > 0 {
		s.lo, s.hi = math.Exp(d[c-1]), math.Exp(d[len(d)-c])
	}
	// The test of "ratio <= 1-minEffect" rejects when few differences lie
	// at or below log(1-minEffect): p = P(U <= that count), and p <= alpha
	// exactly when the lower limit is above 1-minEffect. A difference at
	// the edge (ties in coarse data, to rounding) counts against "same".
	const edge = 1e-12
	below, _ := slices.BinarySearch(d, math.Log(1-minEffect)+edge)
	notAbove, _ := slices.BinarySearch(d, math.Log(1+minEffect)-edge)
	s.pSame = math.Max(cdf[below], cdf[len(d)-notAbove])
	return s
}

func logs(xs []float64) []float64 {
	l := make([]float64, len(xs))
	for i, x := range xs {
		l[i] = math.Log(x)
	}
	return l
}

// The sequential boundary of the interval: the one-sided level of each
// look's limits. It is calibrated like the rank tests' boundary: the same
// weights (earlyWeight before the last look, 1 at it), scaled so that over
// all looks the chance that a limit ever excludes the true ratio is at most
// (1-Confidence)/2 on each side. So the interval reported at whatever look
// the sampler stops at holds the true ratio with probability at least
// Confidence, and "same" (the interval inside ±MinEffect) is a two
// one-sided tests equivalence verdict whose false-"same" rate, for a true
// change of exactly MinEffect, is at most (1-Confidence)/2 over all looks.

type shiftKey struct {
	level float64
	looks string
}

var shiftBoundaries sync.Map // shiftKey -> []float64

// precomputedShift holds the calibrated boundaries of the plans the tools
// use by default, at Confidence 0.95: compare's (DefaultThresholds) and a
// bisection's endpoints and search (5 to 60 runs per side by 5,
// bisect.DefaultThresholds), so that no process spends a second or two
// calibrating them, at the rank interval's share of the level
// (rankShiftLevel). TestPrecomputedShiftBoundary checks that calibrateShift
// still gives exactly these levels. The first look (5 per side) cannot
// reach its level: its interval is unbounded.
var precomputedShift = map[string][]float64{
	"[5 10 15 20 25 30]": {
		0.0019262962259264948, 0.0019262962259264948, 0.0019262962259264948,
		0.0019262962259264948, 0.0019262962259264948, 0.019262962259264948,
	},
	"[5 10 15 20 25 30 35 40 45 50 55 60]": {
		0.0017712338022658172, 0.0017712338022658172, 0.0017712338022658172,
		0.0017712338022658172, 0.0017712338022658172, 0.0017712338022658172,
		0.0017712338022658172, 0.0017712338022658172, 0.0017712338022658172,
		0.0017712338022658172, 0.0017712338022658172, 0.01771233802265817,
	},
}

func init() {
	for looks, alphas := range precomputedShift {
		shiftBoundaries.Store(shiftKey{rankShiftLevel(DefaultThresholds.Confidence), looks}, alphas)
	}
}

// shiftLevel is the one-sided rate, over all looks, at which a limit of the
// interval may exclude the true ratio.
func shiftLevel(confidence float64) float64 { return (1 - confidence) / 2 }

// rankShiftLevel is the rank interval's share of shiftLevel; the magnitude
// path's interval has the rest (magnitude.go).
func rankShiftLevel(confidence float64) float64 {
	return (1 - magnitudeShare) * shiftLevel(confidence)
}

// shiftAlpha returns the one-sided level of the interval at a look with n
// values per side (the smaller side), chosen as LookAlpha chooses.
func (th Thresholds) shiftAlpha(n int) float64 {
	th = th.WithDefaults()
	looks := th.Looks()
	key := shiftKey{rankShiftLevel(th.Confidence), fmt.Sprint(looks)}
	v, ok := shiftBoundaries.Load(key)
	if !ok {
		v, _ = shiftBoundaries.LoadOrStore(key, calibrateShift(key.level, looks))
	}
	alphas := v.([]float64)
	k := 0
	for i, look := range looks {
		if look <= n {
			k = i
		}
	}
	return alphas[k]
}

// calibrateShift finds the largest c such that a limit at look k with
// one-sided level c·w_k excludes the true shift, at one or more looks, in
// at most level of the simulated comparisons (less calibrationZ standard
// errors). Both sides of each simulated comparison count as a trial.
func calibrateShift(level float64, looks []int) []float64 {
	nmax := looks[len(looks)-1]
	weights, total := lookWeights(looks)
	if total > maxCalibratedRuns || nmax > maxCalibratedSamples {
		return shiftBonferroni(level, looks, weights)
	}
	cdfs := make([][]float64, len(looks))
	for k, n := range looks {
		cdfs[k] = mwCDF(n, n)
	}
	sims := calibrationSimsFor(level)
	q := make([]float64, 2*sims)
	per := (sims + calibrationChunks - 1) / calibrationChunks
	var wg sync.WaitGroup
	for chunk := range calibrationChunks {
		lo, hi := min(chunk*per, sims), min((chunk+1)*per, sims)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(0x73686966^uint64(chunk), uint64(nmax)))
			simulateShiftNull(rng, looks, weights, cdfs, q[2*lo:2*hi])
		}()
	}
	wg.Wait()
	slices.Sort(q)
	trials := float64(len(q))
	mean := level * trials
	allowed := max(int(mean-calibrationZ*math.Sqrt(mean*(1-level))), 0)
	// Rejections are q <= c: take the largest attained value that leaves
	// at most allowed trials at or below it.
	c := 0.0
	for j := allowed; j > 0; j-- {
		if q[j-1] < q[j] {
			c = q[j-1]
			break
		}
	}
	alphas := make([]float64, len(looks))
	for k := range looks {
		alphas[k] = c * weights[k]
	}
	return alphas
}

// simulateShiftNull fills q, two entries per simulated comparison of
// uniform values, with the smallest p/w over the looks of each one-sided
// test: p = P(U <= u) for u the count of pairs with b below a, and for the
// count with b above.
func simulateShiftNull(rng *rand.Rand, looks []int, weights []float64, cdfs [][]float64, q []float64) {
	nmax := looks[len(looks)-1]
	a, b := make([]float64, nmax), make([]float64, nmax)
	sa, sb := make([]float64, 0, nmax), make([]float64, 0, nmax)
	buf := make([]float64, 0, nmax)
	for i := 0; i+1 < len(q); i += 2 {
		for j := range a {
			a[j], b[j] = rng.Float64(), rng.Float64()
		}
		sa, sb = sa[:0], sb[:0]
		q[i], q[i+1] = math.Inf(1), math.Inf(1)
		prev := 0
		for k, n := range looks {
			sa, buf = mergeSorted(buf, sa, a[prev:n]), sa
			sb, buf = mergeSorted(buf, sb, b[prev:n]), sb
			prev = n
			below := 0 // pairs with b below a
			for x, y := 0, 0; x < n; x++ {
				for y < n && sb[y] < sa[x] {
					y++
				}
				below += y
			}
			q[i] = math.Min(q[i], cdfs[k][below]/weights[k])
			q[i+1] = math.Min(q[i+1], cdfs[k][n*n-below]/weights[k])
		}
	}
}

// shiftBonferroni returns levels c·w_k whose union bound over the looks
// that can reach them is level, as bonferroni does for the rank tests.
func shiftBonferroni(level float64, looks []int, weights []float64) []float64 {
	return spendLevels(looks, weights, func(n int) float64 { return mwCDF(n, n)[0] },
		func(sum float64) float64 { return level / sum })
}
