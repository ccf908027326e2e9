package notify

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// TestCurveReport: a finding of several points gets the curve plot, the
// log with a point column, and its curve checks marked in the culprit's
// table; a finding of one point gets no curve plot.
func TestCurveReport(t *testing.T) {
	cmp := func(point string, good, bad float64, curve bool) finding.Comparison {
		v := "regression"
		if curve {
			v = "same"
		}
		return finding.Comparison{Metric: "copy_time", Direction: stats.LowerIsBetter, Point: point, Good: finding.Side{Median: good, N: 10},
			Bad: finding.Side{Median: bad, N: 10}, Ratio: bad / good, RatioLow: bad / good * 0.97, RatioHigh: bad / good * 1.03, Confidence: 0.95, Verdict: v, Curve: curve}
	}
	f := &finding.Finding{ID: "curve", Kind: finding.Regression, Scenario: "copy-concurrent", Metric: "copy_time", Direction: stats.LowerIsBetter,
		Point: "clients=1;clients=4", Points: []string{"clients=1", "clients=4"},
		Culprits: []finding.Culprit{{Commit: finding.Commit{Hash: strings.Repeat("3", 40)}, Parent: finding.Commit{Hash: strings.Repeat("2", 40)}, Verified: true,
			Comparisons: []finding.Comparison{cmp("clients=1", 10, 10.1, true), cmp("clients=4", 4, 5, false)}}},
		Log: []finding.Step{
			{Commit: finding.Commit{Hash: strings.Repeat("2", 40)}, Point: "clients=1", Verdict: finding.StepGood, Samples: []float64{10, 10.2}, N: 2, Median: 10.1},
			{Commit: finding.Commit{Hash: strings.Repeat("2", 40)}, Point: "clients=4", Verdict: finding.StepGood, Samples: []float64{4, 4.1}, N: 2, Median: 4.05},
			{Commit: finding.Commit{Hash: strings.Repeat("3", 40)}, Point: "clients=4", Verdict: finding.StepBad, Samples: []float64{5, 5.1}, N: 2, Median: 5.05, Order: 1},
		},
	}
	dir := t.TempDir()
	names, err := WritePlots(dir, f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, PlotCurve+".png") || !slices.Contains(names, PlotBisection+".svg") {
		t.Fatalf("plots %v", names)
	}
	if fi, err := os.Stat(filepath.Join(dir, PlotCurve+".png")); err != nil || fi.Size() == 0 {
		t.Fatalf("curve plot: %v", err)
	}
	md := Markdown(f, Options{})
	for _, want := range []string{"same (curve check)", "| # | point | commit |", "the curve before and after it"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	f.Points, f.Point = nil, "clients=4"
	for i := range f.Log {
		f.Log[i].Point = ""
	}
	names, err = WritePlots(t.TempDir(), f)
	if err != nil || slices.Contains(names, PlotCurve+".png") {
		t.Errorf("one point: plots %v, %v", names, err)
	}
}
