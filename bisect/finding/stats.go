package finding

import "github.com/pgbisect/pgbisect/bench/stats"

// FromStats converts a comparison of bench/stats into a report row for
// metric (in unit) at matrix point. Values stats leaves NaN (a median that
// is not positive) become 0, which reports show as "?".
func FromStats(metric, unit, point string, c stats.Comparison) Comparison {
	return Comparison{
		Metric: metric, Unit: unit, Direction: c.Direction, Point: point,
		Good:  Side{Median: stats.Finite(c.A.Median), RelStddev: stats.Finite(c.A.RelStddev), N: c.A.N},
		Bad:   Side{Median: stats.Finite(c.B.Median), RelStddev: stats.Finite(c.B.RelStddev), N: c.B.N},
		Ratio: stats.Finite(c.Ratio), RatioLow: stats.Finite(c.Lo), RatioHigh: stats.Finite(c.Hi),
		Confidence: stats.Finite(c.Confidence), P: stats.Finite(c.P),
		Verdict: c.Verdict.String(),
	}
}
