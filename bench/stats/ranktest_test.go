package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	mstats "github.com/aclements/go-moremath/stats"
)

// Permeability constants of the human chorioamnion, Hollander and Wolfe
// (1973), Nonparametric Statistical Methods, p. 69; the example of R's
// wilcox.test documentation, which prints "W = 35, p-value = 0.1272" for the
// one-sided test, so the two-sided exact p-value is 0.2544.
var (
	hollanderX = []float64{0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46}
	hollanderY = []float64{1.15, 0.88, 0.90, 0.74, 1.21}
)

func TestMannWhitneyPublished(t *testing.T) {
	c := Compare(hollanderX, hollanderY, LowerIsBetter, Thresholds{})
	if math.Abs(c.PMannWhitney-0.2544) > 5e-5 {
		t.Errorf("Mann-Whitney p = %.5f, want 0.2544 (Hollander & Wolfe 1973)", c.PMannWhitney)
	}
	if want := bruteForceP(hollanderX, hollanderY, uStatistic); math.Abs(c.PMannWhitney-want) > 1e-12 {
		t.Errorf("Mann-Whitney p = %v, full enumeration gives %v", c.PMannWhitney, want)
	}
}

func TestKSPublished(t *testing.T) {
	// Complete separation: D = 1 and p = 2/C(6,3) = 0.1, as R's
	// ks.test(1:3, 4:6) prints.
	d, p := KSTest([]float64{1, 2, 3}, []float64{4, 5, 6})
	if d != 1 || math.Abs(p-0.1) > 1e-12 {
		t.Errorf("KSTest(1:3, 4:6) = D %v p %v, want 1 and 0.1", d, p)
	}
	// Equal sizes: the closed form of Gnedenko and Korolyuk (1951),
	// P(D >= k/n) = 2 Σ_{j>=1} (-1)^(j+1) C(2n, n-jk) / C(2n, n).
	for _, n := range []int{3, 5, 8, 10, 20, 30} {
		for k := 1; k <= n; k++ {
			want := 0.0
			for j := 1; n-j*k >= 0; j++ {
				want += math.Pow(-1, float64(j+1)) * 2 * math.Exp(logChoose(2*n, n-j*k)-logChoose(2*n, n))
			}
			got := ksPValue(n, n, k*n, nil)
			if math.Abs(got-want) > 1e-9*math.Max(want, 1e-6) && math.Abs(got-want) > 1e-13 {
				t.Errorf("n=%d D=%d/%d: p = %v, Gnedenko-Korolyuk gives %v", n, k, n, got, want)
			}
		}
	}
}

func TestKSAgainstEnumeration(t *testing.T) {
	// Unequal sizes and ties: the exact conditional p-value must equal the
	// share of all relabellings of the pooled values whose D reaches the
	// observed D.
	cases := []struct{ x, y []float64 }{
		{[]float64{1, 2, 3, 4}, []float64{2.5, 5, 6, 7, 8, 9}},
		{[]float64{1, 2, 2, 3, 5}, []float64{2, 3, 3, 4, 6, 6, 7}},
		{[]float64{10, 10, 10, 11}, []float64{10, 11, 11, 11, 12}},
		{hollanderY, hollanderX},
	}
	for _, c := range cases {
		x, y := sorted(c.x), sorted(c.y)
		_, p := KSTest(x, y)
		if want := bruteForceP(x, y, ksStatistic); math.Abs(p-want) > 1e-12 {
			t.Errorf("KSTest(%v, %v) p = %v, full enumeration gives %v", x, y, p, want)
		}
	}
}

func TestKSAsymptotic(t *testing.T) {
	// Beyond the exact limit the asymptotic distribution is used; near the
	// limit both must agree to within a few percent of p.
	rng := rand.New(rand.NewPCG(1, 1))
	x, y := make([]float64, 450), make([]float64, 450)
	for i := range x {
		x[i], y[i] = rng.NormFloat64(), 0.2+rng.NormFloat64()
	}
	slices.Sort(x)
	slices.Sort(y)
	d, exact := KSTest(x, y)
	approx := ksAsymptotic(d, len(x), len(y))
	if math.Abs(approx-exact) > 0.1*exact {
		t.Errorf("D=%v: asymptotic p %v, exact %v", d, approx, exact)
	}
}

// TestNullTableMatchesCompare checks that the p-values the boundary is
// calibrated with are the ones Compare computes.
func TestNullTableMatchesCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, n := range []int{5, 10, 20, 30} {
		tab := newNullTable(n)
		for range 50 {
			x, y := make([]float64, n), make([]float64, n)
			for i := range x {
				x[i], y[i] = rng.Float64(), rng.Float64()+0.3*rng.Float64()
			}
			slices.Sort(x)
			slices.Sort(y)
			u, err := mstats.MannWhitneyUTest(x, y, mstats.LocationDiffers)
			if err != nil {
				t.Fatal(err)
			}
			_, pks := KSTest(x, y)
			want := combineP(u.P, pks)
			if got := tab.p(x, y); math.Abs(got-want) > 1e-9*want {
				t.Fatalf("n=%d: table p %v, Compare p %v", n, got, want)
			}
		}
	}
}

// TestBoundaryHoldsAlpha re-simulates null comparisons with a seed the
// calibration did not use and checks the family-wise rate of the boundary.
func TestBoundaryHoldsAlpha(t *testing.T) {
	for _, th := range []Thresholds{DefaultThresholds, {Alpha: 0.05, StartSamples: 4, Batch: 2, MaxSamples: 16}} {
		th = th.WithDefaults()
		looks, alphas := th.Looks(), th.lookAlphas()
		if alphas[len(alphas)-1] <= th.Alpha/float64(2*len(looks)) {
			t.Errorf("%v: final level %v is no better than Bonferroni", looks, alphas[len(alphas)-1])
		}
		tables := make([]nullTable, len(looks))
		for k, n := range looks {
			tables[k] = newNullTable(n)
		}
		rng := rand.New(rand.NewPCG(77, 77))
		const sims = 40000
		rejected := 0
		nmax := looks[len(looks)-1]
		for range sims {
			a, b := make([]float64, nmax), make([]float64, nmax)
			for i := range a {
				a[i], b[i] = rng.Float64(), rng.Float64()
			}
			for k, n := range looks {
				if tables[k].p(sorted(a[:n]), sorted(b[:n])) < alphas[k] {
					rejected++
					break
				}
			}
		}
		rate := float64(rejected) / sims
		alpha := th.rankAlpha()
		se := math.Sqrt(alpha * (1 - alpha) / sims)
		if rate > alpha+3*se {
			t.Errorf("looks %v: family-wise false rejection rate %.4f > the rank tests' alpha %v", looks, rate, alpha)
		}
		t.Logf("looks %v alpha %v: levels %.5f, simulated family-wise rate %.4f", looks, th.Alpha, alphas, rate)
	}
}

func sorted(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// bruteForceP enumerates every way of choosing which len(x) of the pooled
// values form x and returns the share whose two-sided statistic is at least
// as extreme as the observed one.
func bruteForceP(x, y []float64, stat func(x, y []float64) float64) float64 {
	pooled := append(slices.Clone(x), y...)
	obs := stat(sorted(x), sorted(y))
	m, N := len(x), len(pooled)
	extreme, total := 0, 0
	for mask := 0; mask < 1<<N; mask++ {
		if popcount(mask) != m {
			continue
		}
		var xs, ys []float64
		for i, v := range pooled {
			if mask&(1<<i) != 0 {
				xs = append(xs, v)
			} else {
				ys = append(ys, v)
			}
		}
		total++
		if stat(sorted(xs), sorted(ys)) >= obs-1e-12 {
			extreme++
		}
	}
	return float64(extreme) / float64(total)
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// uStatistic is |U - m*n/2| with ties counted as halves: the two-sided
// Mann-Whitney distance from the centre.
func uStatistic(x, y []float64) float64 {
	u := 0.0
	for _, a := range x {
		for _, b := range y {
			switch {
			case a > b:
				u++
			case a == b:
				u += 0.5
			}
		}
	}
	return math.Abs(u - float64(len(x)*len(y))/2)
}

func ksStatistic(x, y []float64) float64 {
	d, _ := KSTest(x, y)
	return d
}

// TestBonferroniFallback checks the boundary of plans too large to
// calibrate: the union bound over the looks that can reject holds Alpha.
func TestBonferroniFallback(t *testing.T) {
	th := Thresholds{StartSamples: 3, Batch: 5, MaxSamples: 150}.WithDefaults()
	looks, alphas := th.Looks(), th.lookAlphas()
	spent := 0.0
	for k, n := range looks {
		if minRankP(n, n) < alphas[k] {
			spent += (1 + ksWeight) * alphas[k]
		}
	}
	if a := th.rankAlpha(); spent > a*(1+1e-12) || spent < 0.99*a {
		t.Errorf("looks %v: levels %v spend %v of the rank tests' alpha %v", looks, alphas, spent, a)
	}
	if r := alphas[len(alphas)-1] / (alphas[0] / earlyWeight); math.Abs(r-1) > 1e-12 {
		t.Errorf("last look %v is not first %v / earlyWeight", alphas[len(alphas)-1], alphas[0])
	}
}

func TestDefaultBoundary(t *testing.T) {
	th := DefaultThresholds
	if got := calibrate(th.rankAlpha(), th.Looks()); !slices.Equal(got, defaultBoundary) {
		t.Errorf("calibrate(defaults) = %v, stored %v: update defaultBoundary", got, defaultBoundary)
	}
}
