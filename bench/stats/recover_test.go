package stats

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestRecoveredFraction checks the fraction and the rule on exact inputs,
// for both directions of metric.
func TestRecoveredFraction(t *testing.T) {
	tight := func(r float64) Effect { return Effect{Ratio: r, Lo: r * 0.99, Hi: r * 1.01, Level: 0.95} }
	for _, tc := range []struct {
		name          string
		reg, rev      Effect
		want          float64
		recovers      bool
		warn          string
		noInterval    bool
		lowerThanHalf bool
	}{
		{name: "all of a time regression", reg: tight(1.20), rev: tight(1 / 1.20), want: 1, recovers: true},
		{name: "all of a throughput regression", reg: tight(0.80), rev: tight(1 / 0.80), want: 1, recovers: true},
		{name: "half", reg: tight(1.20), rev: tight(1 / math.Sqrt(1.20)), want: 0.5, lowerThanHalf: true},
		{name: "nothing", reg: tight(1.20), rev: tight(1), want: 0},
		{name: "worse", reg: tight(1.20), rev: tight(1.05), want: math.Log(1/1.05) / math.Log(1.20)},
		{name: "no interval", reg: tight(1.20), rev: Effect{Ratio: 1 / 1.2, Lo: 0, Hi: math.Inf(1), Level: 0.95}, want: 1,
			warn: "too few runs", noInterval: true},
		{name: "regression not shown", reg: Effect{Ratio: 1.02, Lo: 0.98, Hi: 1.06, Level: 0.95}, rev: tight(1 / 1.02), want: 1,
			warn: "includes no change", noInterval: true},
		{name: "rough", reg: Effect{Ratio: 1.10, Lo: 1.005, Hi: 1.20, Level: 0.95}, rev: tight(1 / 1.10), want: 1, warn: "rough"},
	} {
		r := Recovered(tc.reg, tc.rev, 0.95)
		if math.Abs(r.Fraction-tc.want) > 1e-9 {
			t.Errorf("%s: fraction %.4f, want %.4f", tc.name, r.Fraction, tc.want)
		}
		if r.Recovers != tc.recovers {
			t.Errorf("%s: recovers %v [%.3f, %.3f]", tc.name, r.Recovers, r.Lo, r.Hi)
		}
		if tc.noInterval != (math.IsInf(r.Lo, -1) && math.IsInf(r.Hi, 1)) {
			t.Errorf("%s: interval [%.3f, %.3f]", tc.name, r.Lo, r.Hi)
		}
		if !tc.noInterval && !(r.Lo < r.Fraction && r.Fraction < r.Hi) {
			t.Errorf("%s: fraction %.3f outside [%.3f, %.3f]", tc.name, r.Fraction, r.Lo, r.Hi)
		}
		if tc.lowerThanHalf && !(r.Lo < RecoverBound) {
			t.Errorf("%s: lower bound %.3f", tc.name, r.Lo)
		}
		joined := strings.Join(r.Warnings, "; ")
		if (tc.warn == "") != (joined == "") || !strings.Contains(joined, tc.warn) {
			t.Errorf("%s: warnings %q, want %q", tc.name, joined, tc.warn)
		}
	}
	if r := Recovered(Effect{Ratio: math.NaN()}, Effect{Ratio: 1}, 0); !math.IsNaN(r.Fraction) || r.Confidence != 0.95 || len(r.Warnings) == 0 {
		t.Errorf("NaN ratio: %+v", r)
	}
}

// TestRecoveredCoverage measures, with Compare on simulated runs (log-
// normal noise of 3%, 20 runs a side), how often the 95% interval holds
// the true fraction: a 15% regression of which a revert undoes 80%. The
// inputs' intervals are conservative, so coverage should be at least
// nominal; 400 seeded repetitions allow for about two points of chance.
func TestRecoveredCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 1))
	sample := func(center float64, n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = center * math.Exp(0.03*rng.NormFloat64())
		}
		return out
	}
	const reps, truth = 400, 0.8
	reg := 1.15
	rev := math.Exp(-truth * math.Log(reg))
	th := Thresholds{MaxSamples: 20}
	covered, recovers := 0, 0
	for i := 0; i < reps; i++ {
		parent, culprit := sample(1, 20), sample(reg, 20)
		bad, reverted := sample(reg, 20), sample(reg*rev, 20)
		r := Recovered(EffectOf(Compare(parent, culprit, LowerIsBetter, th)), EffectOf(Compare(bad, reverted, LowerIsBetter, th)), 0.95)
		if r.Lo <= truth && truth <= r.Hi {
			covered++
		}
		if r.Recovers {
			recovers++
		}
	}
	t.Logf("coverage %d/%d, said to recover %d/%d", covered, reps, recovers, reps)
	if covered < reps*93/100 {
		t.Errorf("the 95%% interval held the true fraction in %d of %d runs", covered, reps)
	}
	if recovers < reps*9/10 {
		t.Errorf("a revert undoing 80%% of a 15%% regression was said to recover it in only %d of %d runs", recovers, reps)
	}
}

// TestRecoveredPower is the revert check's plan on simulated runs: the
// regression (parent, culprit) and the revert (BAD, reverted) measured
// side by side, log-normal noise, a 2x regression fully undone, looked at
// as a culprit check looks (5 runs, then batches of 10, up to 40). The
// rule must be met within the budget nearly always, even at 30% noise,
// as noisy as the shared test machine was.
func TestRecoveredPower(t *testing.T) {
	for _, tc := range []struct {
		sigma float64
		min   int
	}{{0.1, 99}, {0.2, 97}, {0.3, 93}} {
		rng := rand.New(rand.NewPCG(16, uint64(100*tc.sigma)))
		th := Thresholds{Alpha: 0.05, MinEffect: 0.10, MaxSamples: 40, Batch: 10}.WithDefaults()
		shown, runs := 0, 0
		const reps = 100
		for r := 0; r < reps; r++ {
			var v [4][]float64
			centers := [4]float64{1, 2, 2, 1}
			n := 0
			for _, look := range th.Looks() {
				for ; n < look; n++ {
					for i := range v {
						v[i] = append(v[i], centers[i]*math.Exp(tc.sigma*rng.NormFloat64()))
					}
				}
				reg := Compare(v[0], v[1], LowerIsBetter, th)
				rev := Compare(v[2], v[3], LowerIsBetter, th)
				if Recovered(EffectOf(reg), EffectOf(rev), 0.95).Recovers {
					shown++
					runs += look
					break
				}
			}
		}
		t.Logf("noise %.0f%%: recovery shown in %d/%d, at %.1f runs per build on average", 100*tc.sigma, shown, reps, float64(runs)/float64(max(shown, 1)))
		if shown < tc.min {
			t.Errorf("noise %.0f%%: a full revert of a 2x regression shown to recover in only %d of %d", 100*tc.sigma, shown, reps)
		}
	}
}

// TestRecoveredAdditiveCulprits: two culprits whose costs add up (a
// parent at 100, the first culprit +20, the second +60 more). Reverting
// the first on top of BAD takes its 20 off again: all of its regression
// in the metric's units, though only 65% on the log scale.
func TestRecoveredAdditiveCulprits(t *testing.T) {
	reg := Effect{Ratio: 120.0 / 100, Lo: 118.0 / 100, Hi: 122.0 / 100, Level: 0.95, Base: 100}
	rev := Effect{Ratio: 160.0 / 180, Lo: 158.0 / 180, Hi: 162.0 / 180, Level: 0.95, Base: 180}
	r := Recovered(reg, rev, 0.95)
	if math.Abs(r.Fraction-1) > 1e-9 || !r.Recovers || r.Lo > 1 || r.Hi < 1 {
		t.Errorf("additive culprits: %+v, want all of it recovered", r)
	}
	reg.Base, rev.Base = 0, 0
	if r := Recovered(reg, rev, 0.95); math.Abs(r.Fraction-math.Log(180.0/160)/math.Log(1.2)) > 1e-9 {
		t.Errorf("without bases (log scale): %v", r.Fraction)
	}
}
