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
