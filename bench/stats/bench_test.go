package stats

import "testing"

// BenchmarkCompare measures one look with 30 runs per side: two rank tests
// and 2000 bootstrap resamples.
func BenchmarkCompare(b *testing.B) {
	x, y := draw(1, 30, 100, 0.1), draw(2, 30, 105, 0.1)
	Compare(x, y, LowerIsBetter, Thresholds{}) // calibrate the boundary once
	for b.Loop() {
		Compare(x, y, LowerIsBetter, Thresholds{})
	}
}

// BenchmarkCalibrate measures the one-time boundary calibration for the
// default plan.
func BenchmarkCalibrate(b *testing.B) {
	th := DefaultThresholds
	for b.Loop() {
		calibrate(th.Alpha, th.Looks())
	}
}
