package stats

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// The group-sequential boundary: the significance level of each planned
// look, calibrated by simulation under the null hypothesis.
//
// Under the null hypothesis the runs of A and B are exchangeable, so for
// continuous data the ranks at every look are those of a uniformly random
// labelling, whatever the distribution of the measurements. The joint null
// distribution of the Mann–Whitney and Kolmogorov–Smirnov p-values across
// nested looks is therefore the same for every distribution, and one seeded
// simulation on uniform values computes it for all of them.

const (
	// calibrationChunks is the number of independent random streams the
	// calibration runs in parallel.
	calibrationChunks = 8
	// calibrationZ keeps the estimated family-wise rate this many Monte
	// Carlo standard errors below Alpha, so the boundary holds with about
	// 99% confidence despite simulation error.
	calibrationZ = 2.33
	// earlyWeight is the share of the final look's level given to each
	// earlier look. Small early levels keep almost all the power of a single
	// test at MaxSamples for small effects (O'Brien–Fleming-like) while still
	// stopping early for large ones.
	earlyWeight = 0.1
	// ksWeight is the share of the level given to the Kolmogorov–Smirnov
	// test relative to Mann–Whitney: most regressions shift the location,
	// which Mann–Whitney detects with more power; KS is there for changes of
	// shape (a share of the runs getting slower) and needs less of the level.
	ksWeight = 0.25
)

// combineP is the decision statistic P: the smaller of the Mann–Whitney
// p-value and the KS p-value divided by ksWeight, a weighted Bonferroni
// combination (the calibration accounts for the correlation of the two).
func combineP(pMW, pKS float64) float64 {
	return math.Min(1, math.Min(pMW, pKS/ksWeight))
}

type boundaryKey struct {
	alpha float64
	looks string
}

var boundaries sync.Map // boundaryKey -> []float64

// defaultBoundary is the calibrated boundary of DefaultThresholds, stored so
// that a process using the defaults does not spend a second calibrating;
// TestDefaultBoundary checks that calibrate still gives exactly these levels.
// It spends the rank tests' share of Alpha, 0.9% of the default 1% (the
// magnitude path has the rest). The early level is a tenth of the last; the
// last, 0.00730, is an attainable value of P at n = 30.
var defaultBoundary = []float64{
	0.0007301210221340333, 0.0007301210221340333, 0.0007301210221340333,
	0.0007301210221340333, 0.0007301210221340333, 0.007301210221340333,
}

func init() {
	boundaries.Store(boundaryKey{DefaultThresholds.rankAlpha(), fmt.Sprint(DefaultThresholds.Looks())}, defaultBoundary)
}

// rankAlpha is the rank tests' share of Alpha: the family-wise rate of a
// false "different" from them over all looks. The magnitude path has the
// rest (magnitude.go).
func (th Thresholds) rankAlpha() float64 { return (1 - magnitudeShare) * th.Alpha }

// lookAlphas returns the level of each of th.Looks().
func (th Thresholds) lookAlphas() []float64 {
	looks := th.Looks()
	key := boundaryKey{th.rankAlpha(), fmt.Sprint(looks)}
	if v, ok := boundaries.Load(key); ok {
		return v.([]float64)
	}
	// Concurrent first callers may both calibrate; the result is
	// deterministic, so whichever is stored is the same.
	v, _ := boundaries.LoadOrStore(key, calibrate(key.alpha, looks))
	return v.([]float64)
}

// calibrate finds the largest c such that rejecting when p < c*w_k at look
// k (w = earlyWeight before the last look, 1 at it) rejects at most
// Alpha of the simulated null comparisons, less calibrationZ standard
// errors. p is combineP of both tests, as Compare computes it.
func calibrate(alpha float64, looks []int) []float64 {
	nmax := looks[len(looks)-1]
	weights, total := lookWeights(looks)
	if total > maxCalibratedRuns || nmax > maxCalibratedSamples {
		return bonferroni(alpha, looks, weights)
	}
	tables := make([]nullTable, len(looks))
	for k, n := range looks {
		tables[k] = newNullTable(n)
	}

	// The simulations run in calibrationChunks independent streams, in
	// parallel; the result does not depend on how many run at once.
	sims := calibrationSimsFor(alpha)
	q := make([]float64, sims)
	per := (sims + calibrationChunks - 1) / calibrationChunks
	var wg sync.WaitGroup
	for chunk := range calibrationChunks {
		part := q[min(chunk*per, sims):min((chunk+1)*per, sims)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(0x70676269^uint64(chunk), uint64(nmax)))
			simulateNull(rng, looks, weights, tables, part)
		}()
	}
	wg.Wait()
	slices.Sort(q)
	mean := alpha * float64(sims)
	allowed := int(mean - calibrationZ*math.Sqrt(mean*(1-alpha)))
	allowed = max(allowed, 0)
	// Rejections are q < c; with c = q[allowed] at most `allowed` of the
	// simulated comparisons reject.
	c := q[allowed]
	alphas := make([]float64, len(looks))
	for k := range looks {
		alphas[k] = c * weights[k]
	}
	return alphas
}

// Plans beyond these sizes would make the calibration slow (its cost grows
// with the runs summed over all looks: about 1 s for the default 105); they
// get the weighted Bonferroni boundary instead.
const (
	maxCalibratedRuns    = 400
	maxCalibratedSamples = 100
)

// bonferroni returns levels c*w_k whose union bound holds Alpha: P < a
// happens with probability at most a + ksWeight*a under the null hypothesis,
// and looks at which no p-value can be that small spend nothing
// (spendLevels).
func bonferroni(alpha float64, looks []int, weights []float64) []float64 {
	return spendLevels(looks, weights, func(n int) float64 { return minRankP(n, n) },
		func(sum float64) float64 { return alpha / ((1 + ksWeight) * sum) })
}

// spendLevels returns levels c·w_k for the looks, the largest c that a
// union bound allows: look k can reject only if c > t_k = minP(n_k)/w_k
// (no p-value of its test can be smaller than minP). Taking the looks in
// order of t_k, the first j of them may spend with c_j = level(S_j), S_j
// their summed weights; c_j is valid when look j+1 still cannot reject
// (c_j <= t_{j+1}). The best valid c_j is used.
func spendLevels(looks []int, weights []float64, minP func(n int) float64, level func(sum float64) float64) []float64 {
	order := make([]int, len(looks))
	t := make([]float64, len(looks))
	for k, n := range looks {
		order[k] = k
		t[k] = minP(n) / weights[k]
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(t[x], t[y]) })
	best, sum := 0.0, 0.0
	for j, k := range order {
		sum += weights[k]
		c := level(sum)
		if j+1 == len(order) || c <= t[order[j+1]] {
			best = max(best, c)
		}
	}
	alphas := make([]float64, len(looks))
	for k := range looks {
		alphas[k] = best * weights[k]
	}
	return alphas
}

// calibrationSimsFor returns how many null comparisons to simulate: enough
// for about 1,000 expected false rejections, between 20,000 and 100,000.
func calibrationSimsFor(alpha float64) int {
	return int(math.Min(math.Max(1000/alpha, 20000), 100000))
}

// simulateNull fills q with, for each simulated null comparison, the
// smallest p/w over the looks. The samples at each look are the earlier
// look's values plus the new batch, kept sorted by merging.
func simulateNull(rng *rand.Rand, looks []int, weights []float64, tables []nullTable, q []float64) {
	nmax := looks[len(looks)-1]
	a, b := make([]float64, nmax), make([]float64, nmax)
	sa, sb := make([]float64, 0, nmax), make([]float64, 0, nmax)
	buf := make([]float64, 0, nmax)
	for i := range q {
		for j := range a {
			a[j], b[j] = rng.Float64(), rng.Float64()
		}
		sa, sb = sa[:0], sb[:0]
		q[i] = math.Inf(1)
		prev := 0
		for k, n := range looks {
			sa, buf = mergeSorted(buf, sa, a[prev:n]), sa
			sb, buf = mergeSorted(buf, sb, b[prev:n]), sb
			prev = n
			q[i] = math.Min(q[i], tables[k].p(sa, sb)/weights[k])
		}
	}
}

// mergeSorted sorts add in place and returns sorted and add merged into
// dst's storage.
func mergeSorted(dst, sorted, add []float64) []float64 {
	slices.Sort(add)
	dst = dst[:0]
	i, j := 0, 0
	for i < len(sorted) && j < len(add) {
		if sorted[i] <= add[j] {
			dst = append(dst, sorted[i])
			i++
		} else {
			dst = append(dst, add[j])
			j++
		}
	}
	dst = append(dst, sorted[i:]...)
	return append(dst, add[j:]...)
}

// nullTable holds the exact two-sided p-values of both rank tests for two
// samples of n values without ties.
type nullTable struct {
	n   int
	pMW []float64 // by the smaller U
	pKS []float64 // by D*n (for equal sizes D is a multiple of 1/n)
}

func newNullTable(n int) nullTable {
	t := nullTable{n: n, pMW: mwuTwoSided(n), pKS: make([]float64, n+1)}
	for k := 1; k <= n; k++ {
		t.pKS[k] = ksPValue(n, n, k*n, nil)
	}
	t.pKS[0] = 1
	return t
}

// p returns min(pMW, pKS) for sorted samples x and y of size n.
func (t nullTable) p(x, y []float64) float64 {
	n := t.n
	u, i, j, dmax := 0, 0, 0, 0
	for i < n || j < n {
		if j >= n || (i < n && x[i] < y[j]) {
			u += j // this x exceeds j values of y
			i++
		} else {
			j++
		}
		dmax = max(dmax, abs(i-j))
	}
	usmall := min(u, n*n-u)
	return combineP(t.pMW[usmall], t.pKS[dmax])
}

// mwuTwoSided returns the two-sided Mann–Whitney p-value for samples of n
// and n values without ties, indexed by the smaller U, as go-moremath
// computes it: 2*P(U <= u), or 1 when U sits at the centre. Above
// MannWhitneyExactLimit go-moremath uses the normal approximation with
// continuity correction, and so does this.
func mwuTwoSided(n int) []float64 {
	half := n * n / 2
	p := make([]float64, half+1)
	if n > 50 {
		mu := float64(n*n) / 2
		sigma := math.Sqrt(float64(n*n) * float64(2*n+1) / 12)
		for u := range p {
			z := (float64(u) - mu + 0.5) / sigma
			p[u] = math.Min(1, 2*0.5*math.Erfc(-z/math.Sqrt2))
		}
		return p
	}
	// prev[j][u] and cur[j][u] count the orderings of i-1 (resp. i) values
	// of x and j of y with U = u, where U counts, for each x, the ys before
	// it. The last value is either an x (adding j to U) or a y.
	cur := make([][]float64, n+1)
	prev := make([][]float64, n+1)
	for j := range cur {
		cur[j] = make([]float64, n*n+1)
		prev[j] = make([]float64, n*n+1)
	}
	for j := range prev {
		prev[j][0] = 1 // i = 0: a single ordering with U = 0
	}
	for i := 1; i <= n; i++ {
		for j := 0; j <= n; j++ {
			row := cur[j]
			clear(row)
			for u := j; u <= n*n; u++ {
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
	counts := prev[n]
	total := 0.0
	for _, c := range counts {
		total += c
	}
	cdf := 0.0
	for u := range p {
		cdf += counts[u] / total
		p[u] = 2 * cdf
		if 2*u == n*n {
			p[u] = 1
		}
	}
	return p
}

// lookWeights returns each look's share of the last look's level
// (earlyWeight before the last look, 1 at it) and the runs per side summed
// over the looks, which bounds the cost of calibrating them.
func lookWeights(looks []int) (weights []float64, total int) {
	weights = make([]float64, len(looks))
	for k, n := range looks {
		weights[k] = earlyWeight
		total += n
	}
	weights[len(looks)-1] = 1
	return weights, total
}
