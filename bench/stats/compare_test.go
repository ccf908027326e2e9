package stats

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// draw returns n seeded values with median near center and relative noise s.
func draw(seed uint64, n int, center, s float64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 99))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = center * (1 + s*rng.NormFloat64())
	}
	return xs
}

func TestVerdicts(t *testing.T) {
	cases := []struct {
		name string
		a, b []float64
		dir  Direction
		want Verdict
	}{
		{"clear regression, time", draw(1, 10, 100, 0.01), draw(2, 10, 110, 0.01), LowerIsBetter, Regression},
		{"clear improvement, time", draw(1, 10, 100, 0.01), draw(2, 10, 90, 0.01), LowerIsBetter, Improvement},
		{"clear regression, throughput", draw(1, 10, 1000, 0.01), draw(2, 10, 900, 0.01), HigherIsBetter, Regression},
		{"clear improvement, throughput", draw(1, 10, 1000, 0.01), draw(2, 10, 1100, 0.01), HigherIsBetter, Improvement},
		{"A/A with tight data is same", draw(3, 10, 100, 0.005), draw(4, 10, 100, 0.005), LowerIsBetter, Same},
		{"few noisy samples are unknown", draw(5, 5, 100, 0.15), draw(6, 5, 100, 0.15), LowerIsBetter, Unknown},
		{"large effect at five samples is a regression", draw(1, 5, 100, 0.01), draw(2, 5, 150, 0.01), LowerIsBetter, Regression},
		{"a change 100 times the noise at three samples is a regression", draw(1, 3, 100, 0.001), draw(2, 3, 110, 0.001), LowerIsBetter, Regression},
		{"a small effect at five samples is unknown", draw(1, 5, 100, 0.01), draw(2, 5, 105, 0.01), LowerIsBetter, Unknown},
		{"noisy small effect at the budget is inconclusive", draw(7, 30, 100, 0.15), draw(8, 30, 102, 0.15), LowerIsBetter, Inconclusive},
		{"constant values are same", []float64{7, 7, 7, 7, 7, 7, 7, 7, 7, 7}, []float64{7, 7, 7, 7, 7, 7, 7, 7, 7, 7}, HigherIsBetter, Same},
		{"three identical runs per side are same", []float64{7, 7, 7}, []float64{7, 7, 7}, HigherIsBetter, Same},
		{"noisy runs at five per side cannot show same", draw(11, 5, 100, 0.02), draw(12, 5, 100, 0.02), HigherIsBetter, Unknown},
		{"a real but negligible change is same", draw(9, 30, 100, 0.001), draw(10, 30, 100.5, 0.001), LowerIsBetter, Same},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Compare(c.a, c.b, c.dir, Thresholds{})
			if got.Verdict != c.want {
				t.Errorf("verdict %v, want %v\n%+v", got.Verdict, c.want, got)
			}
			if got.Verdict.Different() && !((got.P < got.LookAlpha || got.PMagnitude < 2*got.MagnitudeAlpha) && (got.Lo > 1 || got.Hi < 1)) {
				t.Errorf("%v without the evidence: %+v", got.Verdict, got)
			}
			if got.Verdict == Same && !(got.Lo >= 0.97 && got.Hi <= 1.03) {
				t.Errorf("same with interval [%v, %v] outside ±3%% (p same %v)", got.Lo, got.Hi, got.PSame)
			}
			if !(got.Lo <= got.Ratio && got.Ratio <= got.Hi) {
				t.Errorf("ratio %v outside its interval [%v, %v]", got.Ratio, got.Lo, got.Hi)
			}
		})
	}
}

func TestCompareFields(t *testing.T) {
	a, b := draw(1, 10, 100, 0.01), draw(2, 10, 110, 0.01)
	c := Compare(a, b, LowerIsBetter, Thresholds{})
	if c.A.N != 10 || c.B.N != 10 {
		t.Errorf("n = %d+%d, want 10+10", c.A.N, c.B.N)
	}
	if want := c.B.Median / c.A.Median; c.MedianRatio != want {
		t.Errorf("MedianRatio %v, want %v", c.MedianRatio, want)
	}
	if !(c.Lo < c.Ratio && c.Ratio < c.Hi) || math.Abs(c.Ratio-1.1) > 0.02 {
		t.Errorf("ratio %v [%v, %v], want about 1.10 inside its interval", c.Ratio, c.Lo, c.Hi)
	}
	if math.Abs(c.Worse()-c.Change()) > 0 || c.Worse() <= 0 {
		t.Errorf("lower is better: Worse %v, Change %v", c.Worse(), c.Change())
	}
	h := Compare(a, b, HigherIsBetter, Thresholds{})
	if h.Worse() >= 0 || h.Verdict != Improvement {
		t.Errorf("higher is better: Worse %v verdict %v, want negative and improvement", h.Worse(), h.Verdict)
	}
	if c.P != math.Min(c.PMannWhitney, c.PKS/ksWeight) {
		t.Errorf("P %v is not the combination of %v and %v", c.P, c.PMannWhitney, c.PKS)
	}
}

func TestReproducible(t *testing.T) {
	a, b := draw(11, 15, 100, 0.1), draw(12, 15, 105, 0.1)
	first := Compare(a, b, LowerIsBetter, Thresholds{})
	for range 3 {
		if again := Compare(a, b, LowerIsBetter, Thresholds{}); !reflect.DeepEqual(first, again) {
			t.Fatalf("same input, different result:\n%+v\n%+v", first, again)
		}
	}
	// The order the runs arrived in does not matter.
	ra, rb := slices.Clone(a), slices.Clone(b)
	slices.Reverse(ra)
	slices.Reverse(rb)
	if again := Compare(ra, rb, LowerIsBetter, Thresholds{}); !reflect.DeepEqual(first, again) {
		t.Fatalf("reordered input, different result:\n%+v\n%+v", first, again)
	}
	// Compare must not sort its caller's slices.
	if !slices.Equal(ra, reversed(a)) {
		t.Fatal("Compare modified its input")
	}
}

func reversed(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Reverse(s)
	return s
}

func TestMore(t *testing.T) {
	th := DefaultThresholds
	if got := th.Looks(); !slices.Equal(got, []int{5, 10, 15, 20, 25, 30}) {
		t.Errorf("Looks() = %v", got)
	}
	for _, c := range []struct {
		na, nb int
		v      Verdict
		want   int
	}{
		{5, 5, Unknown, 5}, {10, 10, Unknown, 5}, {7, 8, Unknown, 3}, {25, 25, Unknown, 5},
		{30, 30, Unknown, 0}, {10, 10, Same, 0}, {10, 10, Regression, 0}, {30, 30, Inconclusive, 0}, {0, 0, Unknown, 5},
	} {
		cmp := Comparison{Verdict: c.v, A: Summary{N: c.na}, B: Summary{N: c.nb}}
		if got := th.More(cmp); got != c.want {
			t.Errorf("More(n=%d+%d, %v) = %d, want %d", c.na, c.nb, c.v, got, c.want)
		}
	}
	th = Thresholds{StartSamples: 4, Batch: 3, MaxSamples: 12}
	if got := th.Looks(); !slices.Equal(got, []int{4, 7, 10, 12}) {
		t.Errorf("Looks() = %v, want [4 7 10 12]", got)
	}
}

func TestAtBudget(t *testing.T) {
	c := Compare(draw(5, 10, 100, 0.2), draw(6, 10, 100, 0.2), LowerIsBetter, Thresholds{})
	if c.Verdict != Unknown {
		t.Fatalf("verdict %v, want unknown", c.Verdict)
	}
	if got := c.AtBudget(); got.Verdict != Inconclusive || len(got.Warnings) != len(c.Warnings)+1 {
		t.Errorf("AtBudget: %v with %q", got.Verdict, got.Warnings)
	}
	d := Compare(draw(1, 10, 100, 0.01), draw(2, 10, 110, 0.01), LowerIsBetter, Thresholds{})
	if got := d.AtBudget(); got.Verdict != Regression {
		t.Errorf("AtBudget changed a decided verdict to %v", got.Verdict)
	}
}

// TestLook checks the look rule the sampling loop and the planner share:
// more runs while undecided within the budget, Inconclusive once it or
// the time is spent, a decided verdict left as it is.
func TestLook(t *testing.T) {
	th := DefaultThresholds
	for _, c := range []struct {
		n        int
		v        Verdict
		overTime bool
		want     Verdict
		more     int
	}{
		{10, Unknown, false, Unknown, 5}, {30, Unknown, false, Inconclusive, 0}, {10, Unknown, true, Inconclusive, 0},
		{10, Regression, false, Regression, 0}, {10, Same, true, Same, 0},
	} {
		got, more := th.Look(Comparison{Verdict: c.v, A: Summary{N: c.n}, B: Summary{N: c.n}}, c.overTime)
		if got.Verdict != c.want || more != c.more {
			t.Errorf("Look(n=%d, %v, over time %v) = %v, %d; want %v, %d", c.n, c.v, c.overTime, got.Verdict, more, c.want, c.more)
		}
	}
}

func TestWarnings(t *testing.T) {
	has := func(c Comparison, sub string) bool {
		for _, w := range c.Warnings {
			if strings.Contains(w, sub) {
				return true
			}
		}
		return false
	}
	if c := Compare(draw(1, 4, 100, 0.01), draw(2, 4, 100, 0.01), LowerIsBetter, Thresholds{}); !has(c, "too few samples") {
		t.Errorf("no too-few warning: %q", c.Warnings)
	}
	if c := Compare(draw(1, 10, 100, 0.2), draw(2, 10, 100, 0.01), LowerIsBetter, Thresholds{}); !has(c, "baseline is noisy") || has(c, "candidate is noisy") {
		t.Errorf("noise warnings: %q", c.Warnings)
	}
	// Same median, much wider spread: KS sees it, Mann-Whitney does not.
	var tight, wide []float64
	for i := range 30 {
		tight = append(tight, 100+float64(i)/30)
		if i%2 == 0 {
			wide = append(wide, 90+float64(i)/10)
		} else {
			wide = append(wide, 110-float64(i)/10)
		}
	}
	c := Compare(tight, wide, LowerIsBetter, Thresholds{})
	if !has(c, "shape or spread") || c.Verdict.Different() {
		t.Errorf("spread change: verdict %v, p MW %v KS %v, warnings %q", c.Verdict, c.PMannWhitney, c.PKS, c.Warnings)
	}
	var two []float64
	for i := range 20 {
		v := 100 + float64(i%7)/10
		if i%3 == 0 {
			v += 20
		}
		two = append(two, v)
	}
	if c := Compare(two, draw(3, 20, 100, 0.01), LowerIsBetter, Thresholds{}); !has(c, "baseline looks bimodal") || has(c, "candidate looks bimodal") {
		t.Errorf("bimodal warnings: %q", c.Warnings)
	}
	if c := Compare([]float64{0, 1, 2}, []float64{1, 2, 3}, LowerIsBetter, Thresholds{}); !has(c, "not all positive") || !math.IsNaN(c.Ratio) {
		t.Errorf("non-positive values: ratio %v warnings %q", c.Ratio, c.Warnings)
	}
	if c := Compare([]float64{1, 2, math.NaN()}, []float64{1, 2, 3}, LowerIsBetter, Thresholds{}); c.Verdict != Unknown || !has(c, "NaN") {
		t.Errorf("NaN: verdict %v warnings %q", c.Verdict, c.Warnings)
	}
	if c := Compare(nil, []float64{1}, LowerIsBetter, Thresholds{}); c.Verdict != Unknown {
		t.Errorf("empty baseline: %v", c.Verdict)
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{4, 1, 3, 2})
	want := Summary{N: 4, Median: 2.5, Min: 1, Max: 4, Mean: 2.5, Stddev: math.Sqrt(5.0 / 3), RelStddev: math.Sqrt(5.0/3) / 2.5}
	if math.Abs(s.Stddev-want.Stddev) > 1e-12 || math.Abs(s.RelStddev-want.RelStddev) > 1e-12 {
		t.Errorf("Summarize = %+v, want %+v", s, want)
	}
	s.Stddev, s.RelStddev, want.Stddev, want.RelStddev = 0, 0, 0, 0
	if s != want {
		t.Errorf("Summarize = %+v, want %+v", s, want)
	}
	if (Summarize(nil) != Summary{}) {
		t.Error("Summarize(nil) is not zero")
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Unknown: "unknown", Same: "same", Regression: "regression", Improvement: "improvement", Inconclusive: "inconclusive"} {
		if v.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(v), v.String(), want)
		}
	}
}

// TestNearDeterministic covers issue 28's counts: ties, identical runs and
// zero spread give verdicts in a handful of runs per side, never NaN or an
// infinite interval once decided.
func TestNearDeterministic(t *testing.T) {
	counts := Thresholds{MinEffect: 0.005, Resolution: 1}
	base := []float64{321.84e6, 321.80e6, 321.80e6} // issue 28's three COPY runs
	up := make([]float64, len(base))
	for i, x := range base {
		up[i] = math.Round(1.005 * x)
	}
	cases := []struct {
		name string
		a, b []float64
		th   Thresholds
		want Verdict
	}{
		{"instruction counts, unchanged", base, []float64{321.80e6, 321.84e6, 321.82e6}, counts, Same},
		{"instruction counts, +0.5%", base, up, counts, Regression},
		{"identical counts on both sides", []float64{5e8, 5e8, 5e8}, []float64{5e8, 5e8, 5e8}, counts, Same},
		{"constant sides 0.5% apart, resolution 1", []float64{4e8, 4e8, 4e8}, []float64{4.02e8, 4.02e8, 4.02e8}, counts, Regression},
		// Without a declared resolution the gap between the sides is the
		// only unit the data show: three runs are not enough.
		{"constant sides 1% apart, no resolution", []float64{100, 100, 100}, []float64{101, 101, 101}, Thresholds{MinEffect: 0.005}, Unknown},
		{"ties on a coarse grid", []float64{10, 10, 11, 10, 11}, []float64{10, 11, 10, 10, 11}, Thresholds{}, Unknown},
		{"direction unset is lower is better", base, up, counts, Regression},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := LowerIsBetter
			if strings.HasPrefix(c.name, "direction unset") {
				dir = ""
			}
			got := Compare(c.a, c.b, dir, c.th)
			if got.Verdict != c.want {
				t.Errorf("verdict %v, want %v\n%+v", got.Verdict, c.want, got)
			}
			for _, x := range []float64{got.Ratio, got.Lo, got.Hi, got.PMagnitude} {
				if math.IsNaN(x) || got.Verdict.Decided() && math.IsInf(x, 0) {
					t.Errorf("ratio %v [%v, %v], p magnitude %v", got.Ratio, got.Lo, got.Hi, got.PMagnitude)
				}
			}
			if got.Verdict.Decided() && slices.ContainsFunc(got.Warnings, func(w string) bool { return strings.HasPrefix(w, tooFewSamples) }) {
				t.Errorf("decided, yet warns %q", got.Warnings)
			}
		})
	}
}

func TestFirstLookAndMagnitudeLooks(t *testing.T) {
	th := DefaultThresholds
	if got := th.FirstLook(); got != 3 {
		t.Errorf("FirstLook() = %d, want 3", got)
	}
	if got := th.magnitudeLooks(); !slices.Equal(got, []int{3, 5}) {
		t.Errorf("magnitude looks %v, want [3 5]", got)
	}
	// Its levels spend its share of Alpha (scaled by the calibration),
	// a quarter at the first look, and nothing where the ranks decide.
	a3, a5, a10 := th.MagnitudeAlpha(3), th.MagnitudeAlpha(5), th.MagnitudeAlpha(10)
	if want := magnitudeCalibration * magnitudeShare * th.Alpha / 2; math.Abs(a3+a5-want) > 1e-15 || math.Abs(a3-want/4) > 1e-15 || a10 != 0 {
		t.Errorf("levels %v at 3, %v at 5, %v at 10; want %v in all", a3, a5, a10, want)
	}
	if got := (Thresholds{StartSamples: 2}).FirstLook(); got != 2 {
		t.Errorf("StartSamples 2: FirstLook() = %d", got)
	}
	c := Compare(draw(1, 3, 100, 0.01), draw(2, 3, 101, 0.01), LowerIsBetter, Thresholds{})
	if more := th.More(c); c.Verdict != Unknown || more != 2 {
		t.Errorf("after an undecided first look: %v, More %d, want 2", c.Verdict, more)
	}
}

// TestBimodalAnyOrder: Bimodal takes values in the order they were
// measured and leaves them so.
func TestBimodalAnyOrder(t *testing.T) {
	xs := []float64{1.0, 2.0, 1.01, 2.02, 0.99, 1.98, 1.02, 2.01}
	orig := slices.Clone(xs)
	if !Bimodal(xs) || !slices.Equal(xs, orig) {
		t.Errorf("Bimodal(%v) = false or reordered it", orig)
	}
	if Bimodal([]float64{1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98, 1.01}) {
		t.Error("one group called bimodal")
	}
}
