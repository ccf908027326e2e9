package bench

import (
	"testing"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// TestThresholdLayers checks the order every command layers thresholds in:
// defaults < config < scenario < metric < flags.
func TestThresholdLayers(t *testing.T) {
	sc, err := Load([]byte(`
name: layers
stats:
  min_effect: 0.10
  batch: 3
workload:
  - name: q
    sql: SELECT 1
metrics:
  - name: time
    step: q
    value: elapsed
    min_effect: 0.15
  - name: plain
    step: q
    value: elapsed
`), "layers.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	specs := sc.MetricSpecs()
	base := stats.Overlay{Alpha: 0.02, MinEffect: 0.03, MaxSamples: 30}.Apply(stats.DefaultThresholds)
	for _, tt := range []struct {
		name      string
		m         *Metric
		flags     *stats.Overlay
		minEffect float64
		alpha     float64
	}{
		{"scenario over config", nil, nil, 0.10, 0.02},
		{"metric over scenario", &specs[0], nil, 0.15, 0.02},
		{"metric without its own", &specs[1], nil, 0.10, 0.02},
		{"flags over metric", &specs[0], &stats.Overlay{MinEffect: 0.2, Alpha: 0.04}, 0.2, 0.04},
		{"unset flags keep the metric's", &specs[0], &stats.Overlay{}, 0.15, 0.02},
	} {
		th := sc.Thresholds(base, tt.m, tt.flags)
		if th.MinEffect != tt.minEffect || th.Alpha != tt.alpha || th.Batch != 3 || th.MaxSamples != 30 {
			t.Errorf("%s: %+v, want min_effect %g, alpha %g, batch 3, max_samples 30", tt.name, th, tt.minEffect, tt.alpha)
		}
	}
}

// TestCountResolution: an instructions metric's thresholds declare the
// count's unit, so that identical counts decide at the first look; a time
// metric's leave it to the data.
func TestCountResolution(t *testing.T) {
	sc, err := Load([]byte("workload:\n  - name: c\n    sql: SELECT 1\nmetrics:\n  - {name: n, step: c, value: instructions}\n  - {name: e, step: c, value: elapsed}\n"), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ms := sc.MetricSpecs()
	if got := sc.Thresholds(stats.Thresholds{}, &ms[0], nil).Resolution; got != 1 {
		t.Errorf("instructions: resolution %v, want 1", got)
	}
	if got := sc.Thresholds(stats.Thresholds{}, &ms[1], nil).Resolution; got != 0 {
		t.Errorf("elapsed: resolution %v, want 0 (from the data)", got)
	}
	same := []float64{321800000, 321800000, 321800000}
	th := sc.Thresholds(stats.Thresholds{}, &ms[0], nil)
	th.MinEffect = 0.005
	slower := []float64{323500000, 323500000, 323500000}
	if c := stats.Compare(same, slower, stats.LowerIsBetter, th); c.Verdict != stats.Regression {
		t.Errorf("identical counts 0.5%% apart at 3 a side: %v, want a regression", c.Verdict)
	}
	if c := stats.Compare(same, same, stats.LowerIsBetter, th); c.Verdict != stats.Same {
		t.Errorf("identical counts at 3 a side: %v, want same", c.Verdict)
	}
}
