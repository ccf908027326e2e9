package nightly

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
)

// nightlySeries simulates nights medians of three samples each around
// level, with relative noise rel per sample, stepping up by step from
// night at on.
func nightlySeries(r *rand.Rand, nights, at int, level, step, rel float64) []float64 {
	out := make([]float64, nights)
	for i := range out {
		center := level
		if i >= at {
			center *= 1 + step
		}
		xs := make([]float64, 3)
		for j := range xs {
			xs[j] = center * (1 + rel*r.NormFloat64())
		}
		out[i] = stats.Summarize(xs).Median
	}
	return out
}

// TestCountSeriesFindsOnePercentStep: a nightly series of an instruction
// count (copy-single-instructions' copy_instructions, with the thresholds
// the nightly pass derives from the scenario) finds a 1% step at the
// night it happened, where the same step under the noise of a time is
// not found; and the count metric's own min_effect is what lets it
// through (with a time metric's 5% the step is dropped).
func TestCountSeriesFindsOnePercentStep(t *testing.T) {
	sc, err := bench.LoadFile("../../../configs/scenarios/copy-single-instructions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m bench.Metric
	for _, spec := range sc.MetricSpecs() {
		if spec.Name == "copy_instructions" {
			m = spec
		}
	}
	base := stats.Thresholds{Alpha: 0.05, MinEffect: 0.05, MaxSamples: 60}.WithDefaults()
	th := sc.Thresholds(base, &m, nil)
	if th.MinEffect != 0.005 {
		t.Fatalf("copy_instructions min effect %v, want the scenario's 0.005", th.MinEffect)
	}
	r := rand.New(rand.NewPCG(28, 6))
	// Count-like noise: measured 0.0005-0.0008% per sample here; 0.002%
	// is generous.
	counts := nightlySeries(r, 60, 40, 2.033e9, 0.01, 2e-5)
	cps := seriesChanges(counts, th)
	if len(cps) != 1 || cps[0].Index != 40 || math.Abs(cps[0].RelChange-0.01) > 0.0005 {
		t.Fatalf("count series: change points %+v, want one at night 40 of about +1%%", cps)
	}
	if cps := seriesChanges(counts, base); len(cps) != 0 {
		t.Errorf("with a time's 5%% min effect the 1%% step should be dropped: %+v", cps)
	}
	// The same step in elapsed time, 8% noise per sample (copy-single's
	// measured floor on this machine).
	times := nightlySeries(r, 60, 40, 6.7, 0.01, 0.08)
	if cps := seriesChanges(times, th); len(cps) != 0 {
		t.Errorf("a 1%% step under 8%% noise found anyway: %+v", cps)
	}
}
