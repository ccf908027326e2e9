package changepoint

import (
	"math"
	"math/rand/v2"
	"testing"
)

// noisy returns n points of level(i) plus Gaussian noise of relative
// standard deviation sd, from a fixed seed.
func noisy(seed uint64, n int, sd float64, level func(i int) float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float64, n)
	for i := range x {
		l := level(i)
		x[i] = l + r.NormFloat64()*sd*l
	}
	return x
}

func steps(bounds []int, levels []float64) func(int) float64 {
	return func(i int) float64 {
		k := 0
		for k < len(bounds) && i >= bounds[k] {
			k++
		}
		return levels[k]
	}
}

func TestDetectKnownShifts(t *testing.T) {
	cases := []struct {
		name   string
		series []float64
		want   []int     // indices, each within ±tol
		tol    int       // how far a found index may be from the true one
		rel    []float64 // expected RelChange, within ±0.02
	}{
		{
			name:   "one step up 10%",
			series: noisy(1, 60, 0.01, steps([]int{30}, []float64{100, 110})),
			want:   []int{30}, rel: []float64{0.10},
		},
		{
			name:   "one step down 5%, 2% noise",
			series: noisy(2, 40, 0.02, steps([]int{25}, []float64{100, 95})),
			// A 2.5σ shift: where it starts is known only to a few nights.
			want: []int{25}, tol: 5, rel: []float64{-0.05},
		},
		{
			name:   "two steps",
			series: noisy(3, 90, 0.01, steps([]int{30, 60}, []float64{100, 110, 95})),
			want:   []int{30, 60}, rel: []float64{0.10, 95.0/110 - 1},
		},
		{
			name:   "shift three nights before the end",
			series: noisy(4, 30, 0.01, steps([]int{27}, []float64{100, 120})),
			want:   []int{27}, rel: []float64{0.20},
		},
		{
			name:   "steps in a series longer than the window",
			series: noisy(5, 200, 0.01, steps([]int{40, 130}, []float64{100, 105, 100})),
			want:   []int{40, 130}, rel: []float64{0.05, -0.05},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Detect(c.series, Options{})
			if len(got) != len(c.want) {
				t.Fatalf("found %d change points %+v, want at %v", len(got), got, c.want)
			}
			for k, cp := range got {
				if d := cp.Index - c.want[k]; d < -c.tol || d > c.tol {
					t.Errorf("change point %d at index %d, want %d", k, cp.Index, c.want[k])
				}
				if math.Abs(cp.RelChange-c.rel[k]) > 0.02 {
					t.Errorf("change point %d: RelChange %.3f, want %.3f", k, cp.RelChange, c.rel[k])
				}
				if cp.P > DefaultOptions.MaxP {
					t.Errorf("change point %d: P %g above MaxP", k, cp.P)
				}
			}
		})
	}
}

// A slow ramp (1.5% a night for six nights) is the shift night-to-night
// comparison misses: no single night differs much from the one before.
func TestDetectSlowRamp(t *testing.T) {
	const start, end = 30, 36
	level := func(i int) float64 {
		switch {
		case i < start:
			return 100
		case i >= end:
			return 109
		default:
			return 100 + 9*float64(i-start+1)/float64(end-start+1)
		}
	}
	series := noisy(6, 70, 0.01, level)
	for i := start; i < end; i++ {
		// The premise: each night's step is within the night-to-night noise.
		if step := level(i) - level(i-1); step > 3*0.01*100 {
			t.Fatalf("ramp step %g is not slow", step)
		}
	}
	got := Detect(series, Options{})
	if len(got) == 0 {
		t.Fatal("no change point found in a 9% ramp")
	}
	total := 1.0
	for _, cp := range got {
		if cp.Index < start-1 || cp.Index > end+1 {
			t.Errorf("change point at %d is outside the ramp [%d, %d]", cp.Index, start, end)
		}
		total *= 1 + cp.RelChange
	}
	if total < 1.05 {
		t.Errorf("change points add up to %+.1f%%, want about +9%%: %+v", (total-1)*100, got)
	}
}

// One bad night (a noisy neighbour, a cron job) is not a change of level,
// wherever it falls.
func TestDetectIgnoresSingleOutlier(t *testing.T) {
	for _, at := range []int{0, 1, 20, 38, 39} {
		series := noisy(7, 40, 0.01, func(int) float64 { return 100 })
		series[at] = 150
		if got := Detect(series, Options{}); len(got) != 0 {
			t.Errorf("outlier at %d: found change points %+v", at, got)
		}
	}
}

// An outlier next to a real shift must not hide the shift.
func TestDetectShiftWithOutlier(t *testing.T) {
	series := noisy(8, 60, 0.01, steps([]int{30}, []float64{100, 108}))
	series[45] = 160
	got := Detect(series, Options{})
	if len(got) != 1 || got[0].Index != 30 {
		t.Fatalf("got %+v, want one change point at 30", got)
	}
}

// Over many seeds of pure noise, change points must be rare: MaxP bounds the
// false alarms of each test, and the merge step removes most of the rest.
func TestDetectFalseAlarms(t *testing.T) {
	const trials = 200
	alarms := 0
	for s := range uint64(trials) {
		if len(Detect(noisy(100+s, 60, 0.02, func(int) float64 { return 100 }), Options{})) > 0 {
			alarms++
		}
	}
	if alarms > trials/20 {
		t.Errorf("%d of %d noise-only series had change points", alarms, trials)
	}
}

func TestDetectMinMagnitude(t *testing.T) {
	series := noisy(9, 80, 0.002, steps([]int{40}, []float64{100, 101}))
	if got := Detect(series, Options{}); len(got) != 1 {
		t.Fatalf("a clean 1%% shift: got %+v, want one change point", got)
	}
	if got := Detect(series, Options{MinMagnitude: 0.02}); len(got) != 0 {
		t.Fatalf("MinMagnitude 2%%: got %+v, want none", got)
	}
}

func TestDetectDegenerate(t *testing.T) {
	for _, c := range []struct {
		name   string
		series []float64
		want   int
	}{
		{"empty", nil, 0},
		{"three points", []float64{1, 2, 3}, 0},
		{"constant", []float64{5, 5, 5, 5, 5, 5, 5, 5}, 0},
		{"NaN", []float64{1, 1, 1, math.NaN(), 2, 2, 2, 2}, 0},
		{"clean step", []float64{1, 1, 1, 1, 2, 2, 2, 2}, 1},
	} {
		if got := Detect(c.series, Options{}); len(got) != c.want {
			t.Errorf("%s: got %+v, want %d change points", c.name, got, c.want)
		}
	}
}

func TestDetectDeterministic(t *testing.T) {
	series := noisy(10, 120, 0.01, steps([]int{50, 90}, []float64{100, 104, 97}))
	a, b := Detect(series, Options{}), Detect(series, Options{})
	if len(a) != len(b) {
		t.Fatalf("two runs differ: %+v vs %+v", a, b)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("two runs differ: %+v vs %+v", a[i], b[i])
		}
	}
}

// The O(1) block sums must give the statistic of its definition.
func TestCandidateMatchesDefinition(t *testing.T) {
	x := noisy(11, 17, 0.05, steps([]int{9}, []float64{10, 12}))
	e := newEnergy(x)
	for _, iv := range [][2]int{{0, 17}, {3, 12}, {5, 7}} {
		lo, hi := iv[0], iv[1]
		tau, q := e.candidate(lo, hi)
		bt, bq := -1, 0.0
		for t := lo + 1; t < hi; t++ {
			for k := t + 1; k <= hi; k++ {
				if v := qhat(x[lo:t], x[t:k]); bt < 0 || v > bq {
					bt, bq = t, v
				}
			}
		}
		if tau != bt || math.Abs(q-bq) > 1e-9*math.Max(1, bq) {
			t.Errorf("[%d,%d): candidate %d q=%g, definition %d q=%g", lo, hi, tau, q, bt, bq)
		}
	}
}

func qhat(x, y []float64) float64 {
	n, m := float64(len(x)), float64(len(y))
	var xy, xx, yy float64
	for _, a := range x {
		for _, b := range y {
			xy += math.Abs(a - b)
		}
	}
	for i := range x {
		for k := i + 1; k < len(x); k++ {
			xx += math.Abs(x[i] - x[k])
		}
	}
	for i := range y {
		for k := i + 1; k < len(y); k++ {
			yy += math.Abs(y[i] - y[k])
		}
	}
	v := 2 / (n + m) * xy
	if n > 1 {
		v -= 2 * m / ((n + m) * (n - 1)) * xx
	}
	if m > 1 {
		v -= 2 * n / ((n + m) * (m - 1)) * yy
	}
	return v
}

// Welch's p-value checked against a numerical integral of the t density.
func TestWelch(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5}
	b := []float64{3, 4, 5, 6, 7, 8}
	r := welch(a, b)
	// t = 2.5/sqrt(2.5/5 + 3.5/6), df = 8.989 (Welch–Satterthwaite).
	tv := 2.5 / math.Sqrt(0.5+3.5/6)
	s1, s2 := 0.5, 3.5/6
	df := (s1 + s2) * (s1 + s2) / (s1*s1/4 + s2*s2/5)
	want := 2 * tailIntegral(tv, df)
	if math.Abs(r.p-want) > 1e-6 {
		t.Errorf("p = %.8f, want %.8f", r.p, want)
	}
	if r.p < 0.02 || r.p > 0.05 {
		t.Errorf("p = %g, tables put t=%.3f at df=%.1f between 0.02 and 0.05", r.p, tv, df)
	}
	if got := welch([]float64{1}, []float64{5, 5.1, 4.9}); got.p != 1 {
		t.Errorf("one-point side: p = %g, want 1", got.p)
	}
}

// tailIntegral is ∫_t^∞ of Student's t density with df degrees of freedom,
// by Simpson's rule after substituting x = t + u/(1−u).
func tailIntegral(t, df float64) float64 {
	lg1, _ := math.Lgamma((df + 1) / 2)
	lg2, _ := math.Lgamma(df / 2)
	c := math.Exp(lg1-lg2) / math.Sqrt(df*math.Pi)
	f := func(u float64) float64 {
		if u >= 1 {
			return 0
		}
		x := t + u/(1-u)
		return c * math.Pow(1+x*x/df, -(df+1)/2) / ((1 - u) * (1 - u))
	}
	const n = 20000
	h := 1.0 / n
	sum := f(0) + f(1)
	for i := 1; i < n; i++ {
		w := 2.0
		if i%2 == 1 {
			w = 4
		}
		sum += w * f(float64(i)*h)
	}
	return sum * h / 3
}

func BenchmarkDetect(b *testing.B) {
	series := noisy(12, 365, 0.01, steps([]int{100, 250}, []float64{100, 105, 98}))
	for b.Loop() {
		Detect(series, Options{})
	}
}
