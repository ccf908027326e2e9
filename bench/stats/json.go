package stats

import (
	"encoding/json"
	"math"
)

// MarshalJSON writes Ratio, Lo, Hi and MedianRatio as null when they are NaN (no ratio
// when a median is not positive, as for a counter that stayed at 0): JSON
// has no NaN, and encoding/json would fail the whole document.
func (c Comparison) MarshalJSON() ([]byte, error) {
	type plain Comparison
	return json.Marshal(struct {
		plain
		Ratio, Lo, Hi, MedianRatio *float64
	}{plain(c), finite(c.Ratio), finite(c.Lo), finite(c.Hi), finite(c.MedianRatio)})
}

// UnmarshalJSON reads what MarshalJSON writes, null as NaN.
func (c *Comparison) UnmarshalJSON(data []byte) error {
	type plain Comparison
	var v struct {
		plain
		Ratio, Lo, Hi, MedianRatio *float64
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*c = Comparison(v.plain)
	c.Ratio, c.Lo, c.Hi, c.MedianRatio = orNaN(v.Ratio), orNaN(v.Lo), orNaN(v.Hi), orNaN(v.MedianRatio)
	return nil
}

func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

func orNaN(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}
