package stats

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestComparisonJSON: a comparison of counters that stayed at 0 has no
// ratio; it encodes (as null) and decodes back to NaN, and a normal one
// round-trips.
func TestComparisonJSON(t *testing.T) {
	zero := Compare([]float64{0, 0, 0}, []float64{0, 0, 0}, LowerIsBetter, Thresholds{})
	b, err := json.Marshal(zero)
	if err != nil {
		t.Fatalf("zero counters: %v", err)
	}
	if !strings.Contains(string(b), `"Ratio":null`) {
		t.Errorf("zero counters: %s", b)
	}
	var back Comparison
	if err := json.Unmarshal(b, &back); err != nil || !math.IsNaN(back.Ratio) || back.A.N != 3 {
		t.Errorf("round trip: %v %+v", err, back)
	}
	c := Compare([]float64{1, 1.1, 0.9, 1}, []float64{2, 2.1, 1.9, 2}, LowerIsBetter, Thresholds{})
	b, _ = json.Marshal(c)
	if err := json.Unmarshal(b, &back); err != nil || back.Ratio != c.Ratio || back.Lo != c.Lo || back.Verdict != c.Verdict || back.P != c.P {
		t.Errorf("round trip: %v %+v, want %+v", err, back, c)
	}
}
