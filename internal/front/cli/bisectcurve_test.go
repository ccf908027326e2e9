package cli

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/testkit/golden"
)

// curveLab builds every commit and measures commit i at a point with a
// small deterministic wobble: commit 3 slows clients=4 by 20% and
// clients=16 by 30%, and leaves clients=1 alone.
type curveLab struct{ taken map[string]int }

func (l *curveLab) Build(_ context.Context, hash string) (bisect.Target, error) {
	return int(hash[0] - '0'), nil
}

func (l *curveLab) Measure(ctx context.Context, t bisect.Target) (float64, error) {
	return l.MeasureAt(ctx, t, "clients=1")
}

func (l *curveLab) MeasureAt(_ context.Context, t bisect.Target, point string) (float64, error) {
	i := t.(int)
	k := fmt.Sprintf("%s/%d", point, i)
	j := l.taken[k]
	l.taken[k]++
	base, effect := map[string]float64{"clients=1": 100, "clients=4": 40, "clients=16": 30}[point], map[string]float64{"clients=4": 0.2, "clients=16": 0.3}[point]
	if i >= 3 {
		base *= 1 + effect
	}
	return base * (1 + 0.03*math.Sin(1.7*float64(j)+float64(i))), nil
}

// TestBisectCurvePrintGolden prints a real bisection of three points
// (the engine on a deterministic lab): each point's outcome, and the
// culprit once with the curve before and after it.
func TestBisectCurvePrintGolden(t *testing.T) {
	day := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	var commits []bisect.Commit
	for i := range 6 {
		h := fmt.Sprintf("%d%09d%030d", i, i, i)
		commits = append(commits, bisect.Commit{Hash: h, Subject: fmt.Sprintf("commit %d", i), Author: "A. Author", Date: day.AddDate(0, 0, i), Key: h})
	}
	commits[3].Subject = "slow down COPY with many clients"
	in := bisect.Inputs{Repo: "test", Good: commits[0].Hash, Bad: commits[5].Hash, Scenario: "copy-concurrent.yaml", Metric: "copy_time",
		Direction: stats.LowerIsBetter, Thresholds: stats.Thresholds{Alpha: 0.05, MinEffect: 0.05, MaxSamples: 20},
		Points: []string{"clients=1", "clients=4", "clients=16"}}
	st, err := bisect.NewCurveState(in, commits, day)
	if err != nil {
		t.Fatal(err)
	}
	lab := &curveLab{taken: map[string]int{}}
	if err := (&bisect.Engine{Builder: lab, Measurer: lab, Now: func() time.Time { return day }}).Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	f := finding.FromBisection(st, finding.Report{Branch: "master"})
	if len(f.Culprits) != 1 || f.Culprits[0].Commit.Hash != commits[3].Hash || len(f.Culprits[0].Comparisons) != 3 {
		t.Fatalf("culprits %+v (%s)", f.Culprits, st.Summary)
	}
	var out bytes.Buffer
	if err := bisectPrint(&out, &app.BisectResult{State: st, Finding: f, ReportDir: "/state/reports/" + f.ID}, false); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "bisect-curve.txt", out.String())
}
