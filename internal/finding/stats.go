package finding

import (
	"math"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// FromStats converts a comparison of bench/stats into a report row for
// metric (in unit) at matrix point. Values stats leaves NaN (a median that
// is not positive) become 0, which reports show as "?".
func FromStats(metric, unit, point string, c stats.Comparison) Comparison {
	return Comparison{
		Metric: metric, Unit: unit, Direction: c.Direction, Point: point,
		Good:  Side{Median: finite(c.A.Median), RelStddev: finite(c.A.RelStddev), N: c.A.N},
		Bad:   Side{Median: finite(c.B.Median), RelStddev: finite(c.B.RelStddev), N: c.B.N},
		Ratio: finite(c.Ratio), RatioLow: finite(c.Lo), RatioHigh: finite(c.Hi),
		Confidence: finite(c.Confidence), P: finite(c.P),
		Verdict: c.Verdict.String(),
	}
}

func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
