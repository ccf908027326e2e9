package notify

import (
	"context"
	"math"
	"path/filepath"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// FromStats converts a comparison of bench/stats into a report row for
// metric (in unit) at matrix point. Values stats leaves NaN (a median that
// is not positive) become 0, which reports show as "?".
func FromStats(metric, unit, point string, c stats.Comparison) Comparison {
	dir := LowerIsBetter
	if c.Direction == stats.HigherIsBetter {
		dir = HigherIsBetter
	}
	return Comparison{
		Metric: metric, Unit: unit, Direction: dir, Point: point,
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

// Adder records a finding in an outbox; Dir and the results store's outbox
// implement it.
type Adder interface {
	Add(ctx context.Context, f *Finding) error
}

// ReportsDir is where reports are written under a state directory; serve
// it at github.report_url to show plots in issues.
func ReportsDir(stateDir string) string { return filepath.Join(stateDir, "reports") }

// Publish writes the report of f (files and plots) into reportsDir/<id>/
// and then adds f to out, so that it is posted by the next Deliver (or
// "pgbisect post --pending"). It returns the report directory. bisect and
// the nightly pass call it for every finding, posting or not.
func Publish(ctx context.Context, reportsDir string, f *Finding, out Adder) (string, error) {
	if err := f.Validate(); err != nil {
		return "", err
	}
	dir := filepath.Join(reportsDir, f.ID)
	if _, err := WriteReport(dir, f); err != nil {
		return "", err
	}
	if out != nil {
		if err := out.Add(ctx, f); err != nil {
			return dir, err
		}
	}
	return dir, nil
}
