package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	mstats "github.com/aclements/go-moremath/stats"
)

// TestMWCDFAgainstEnumeration checks the null distribution of U, for equal
// and unequal sizes, against counting all labellings.
func TestMWCDFAgainstEnumeration(t *testing.T) {
	for _, mn := range [][2]int{{3, 3}, {4, 6}, {6, 4}, {5, 5}, {2, 7}} {
		m, n := mn[0], mn[1]
		counts := make([]float64, m*n+1)
		total := 0.0
		for mask := 0; mask < 1<<(m+n); mask++ {
			if popcount(mask) != m {
				continue
			}
			// bit i set: the i-th smallest value belongs to x; U counts,
			// for each x, the ys below it.
			u, ys := 0, 0
			for i := range m + n {
				if mask&(1<<i) != 0 {
					u += ys
				} else {
					ys++
				}
			}
			counts[u]++
			total++
		}
		cdf, acc := mwCDF(m, n), 0.0
		for u, c := range counts {
			acc += c / total
			if math.Abs(cdf[u]-acc) > 1e-12 {
				t.Errorf("m=%d n=%d: P(U <= %d) = %v, enumeration gives %v", m, n, u, cdf[u], acc)
			}
		}
	}
	// Across the exact limit the normal approximation takes over smoothly.
	exact, approx := mwCDF(50, 50), mwCDF(50, 51)
	for _, u := range []int{900, 1000, 1100, 1200} {
		if math.Abs(exact[u]-approx[u+25]) > 0.01 {
			t.Errorf("P(U <= %d): exact at 50+50 %v, approximation at 50+51 %v", u, exact[u], approx[u+25])
		}
	}
}

// TestShiftIntervalInvertsMannWhitney checks the interval against an
// independent implementation: a shift just outside a limit must be rejected
// by go-moremath's one-sided Mann–Whitney test at the level, one just
// inside must not.
func TestShiftIntervalInvertsMannWhitney(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, sizes := range [][2]int{{8, 8}, {7, 12}, {15, 10}, {20, 20}} {
		m, n := sizes[0], sizes[1]
		a, b := make([]float64, m), make([]float64, n)
		for i := range a {
			a[i] = math.Exp(0.1 * rng.NormFloat64())
		}
		for i := range b {
			b[i] = 1.05 * math.Exp(0.1*rng.NormFloat64())
		}
		a, b = sorted(a), sorted(b)
		const alpha = 0.025
		s := shiftInterval(a, b, alpha, 0.03)
		var d []float64
		for _, y := range b {
			for _, x := range a {
				d = append(d, math.Log(y)-math.Log(x))
			}
		}
		slices.Sort(d)
		c := cutCount(mwCDF(m, n), alpha)
		if math.Abs(math.Log(s.lo)-d[c-1]) > 1e-12 || math.Abs(math.Log(s.hi)-d[len(d)-c]) > 1e-12 {
			t.Fatalf("limits [%v, %v] are not d(%d) and d(%d)", s.lo, s.hi, c, len(d)+1-c)
		}
		pLess := func(delta float64) float64 { // H1: the shift is above delta
			y := logs(b)
			for i := range y {
				y[i] -= delta
			}
			r, err := mstats.MannWhitneyUTest(logs(a), y, mstats.LocationLess)
			if err != nil {
				t.Fatal(err)
			}
			return r.P
		}
		if p := pLess((d[c-2] + d[c-1]) / 2); p > alpha {
			t.Errorf("m=%d n=%d: shift below the lower limit has p %v > %v", m, n, p, alpha)
		}
		if p := pLess((d[c-1] + d[c]) / 2); p <= alpha {
			t.Errorf("m=%d n=%d: shift inside the lower limit has p %v <= %v", m, n, p, alpha)
		}
		if hl := math.Log(s.ratio); math.Abs(hl-medianSorted(d)) > 1e-12 {
			t.Errorf("estimate %v is not the median difference %v", hl, medianSorted(d))
		}
	}
}

// TestPSameMatchesInterval checks that the equivalence p-value and the
// interval give the same verdict, and that differences tied at the band's
// edge count against "same".
func TestPSameMatchesInterval(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for range 300 {
		n := 5 + rng.IntN(26)
		shiftBy := 1 + 0.06*(rng.Float64()-0.5)
		a, b := make([]float64, n), make([]float64, n)
		for i := range a {
			a[i] = math.Exp(0.02 * rng.NormFloat64())
			b[i] = shiftBy * math.Exp(0.02*rng.NormFloat64())
		}
		a, b = sorted(a), sorted(b)
		alpha := []float64{0.002, 0.02, 0.05}[rng.IntN(3)]
		s := shiftInterval(a, b, alpha, 0.03)
		inside := s.lo > 0.97 && s.hi < 1.03
		if inside != (s.pSame <= alpha) {
			t.Fatalf("n=%d alpha %v: interval [%v, %v], p same %v", n, alpha, s.lo, s.hi, s.pSame)
		}
	}
}

// TestShiftBoundaryHoldsLevel re-simulates null comparisons with a seed the
// calibration did not use: over all looks each limit may exclude the true
// shift in at most (1-Confidence)/2 of them. A limit excludes it when the
// count of pairs on its side is below the look's cut (see cutCount).
func TestShiftBoundaryHoldsLevel(t *testing.T) {
	for _, th := range []Thresholds{DefaultThresholds, {StartSamples: 4, Batch: 2, MaxSamples: 16, Confidence: 0.9}} {
		th = th.WithDefaults()
		looks := th.Looks()
		level := rankShiftLevel(th.Confidence)
		cuts := make([]int, len(looks))
		for k, n := range looks {
			cuts[k] = cutCount(mwCDF(n, n), th.shiftAlpha(n))
		}
		rng := rand.New(rand.NewPCG(78, 78))
		const sims = 40000
		excluded := 0
		nmax := looks[len(looks)-1]
		for range sims {
			a, b := make([]float64, nmax), make([]float64, nmax)
			for i := range a {
				a[i], b[i] = rng.Float64(), rng.Float64()
			}
			lo, hi := false, false
			for k, n := range looks {
				below := 0 // pairs with b below a: d < 0
				for _, x := range a[:n] {
					for _, y := range b[:n] {
						if y < x {
							below++
						}
					}
				}
				lo = lo || below < cuts[k]
				hi = hi || n*n-below < cuts[k]
			}
			if lo {
				excluded++
			}
			if hi {
				excluded++
			}
		}
		rate := float64(excluded) / (2 * sims)
		se := math.Sqrt(level * (1 - level) / sims)
		if rate > level+3*se {
			t.Errorf("looks %v: a limit excluded the true ratio in %.4f of comparisons, above %v", looks, rate, level)
		}
		t.Logf("looks %v level %.3f: cuts %v, simulated rate %.4f per side", looks, level, cuts, rate)
	}
}

func TestPrecomputedShiftBoundary(t *testing.T) {
	for looks, want := range precomputedShift {
		th := DefaultThresholds
		if looks != "[5 10 15 20 25 30]" {
			th.MaxSamples = 60
		}
		if got := calibrateShift(rankShiftLevel(th.Confidence), th.Looks()); !slices.Equal(got, want) {
			t.Errorf("calibrateShift(%s) = %v, stored %v: update precomputedShift", looks, got, want)
		}
	}
}

func TestShiftBonferroniFallback(t *testing.T) {
	th := Thresholds{MaxSamples: 120, Batch: 10}.WithDefaults()
	looks := th.Looks()
	spent := 0.0
	for _, n := range looks {
		if a := th.shiftAlpha(n); mwCDF(n, n)[0] <= a {
			spent += a
		}
	}
	if level := rankShiftLevel(th.Confidence); spent > level*(1+1e-12) || spent < 0.99*level {
		t.Errorf("looks %v spend %v of %v", looks, spent, level)
	}
}

func TestPSameTiesAtTheEdge(t *testing.T) {
	// Coarse data shifted by exactly the minimum effect: most differences
	// sit at the edge of the band, to rounding. They must not make "same".
	a := []float64{0.10, 0.10, 0.10, 0.10, 0.10, 0.11, 0.11, 0.11, 0.11, 0.11, 0.11, 0.12}
	b := make([]float64, len(a))
	for i, x := range a {
		b[i] = 1.05 * x
	}
	s := shiftInterval(a, b, 0.05, 0.05)
	if s.pSame <= 0.05 {
		t.Errorf("a shift of exactly the minimum effect gives p same %v (interval [%v, %v])", s.pSame, s.lo, s.hi)
	}
}
