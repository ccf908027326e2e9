package stats

import "math"

// Finite maps NaN and infinities to 0, for storing and JSON, which cannot
// carry them (a Comparison's figures are NaN where they are undefined).
func Finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
