package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/app/nightly"
	"github.com/pgbisect/pgbisect/internal/base/machinelock"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/internal/testkit/golden"
	"github.com/pgbisect/pgbisect/store"
)

var printedAt = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestComparePrintGolden(t *testing.T) {
	th := stats.DefaultThresholds
	cmp := func(a, b []float64, d stats.Direction) stats.Comparison { return stats.Compare(a, b, d, th) }
	slow := []float64{101, 99, 100, 102, 98, 100, 101, 99, 100, 100}
	fast := []float64{90, 91, 89, 90, 92, 88, 90, 91, 89, 90}
	res := compareResult{Scenario: "copy-single", A: "1a2b3c4d5e", B: "6f7a8b9c0d", ClientBin: "/var/lib/pgbisect/builds/x/bin",
		Thresholds: th, OrderSeed: 42, Points: []comparePointResult{
			{Point: "", Metrics: []compareMetricResult{
				{Name: "copy_time", Unit: "ms", Better: "lower", Comparison: cmp(fast, slow, stats.LowerIsBetter), A: fast, B: slow},
				{Name: "tps", Unit: "tps", Better: "higher", Comparison: cmp(slow, slow[:9], stats.HigherIsBetter), A: slow, B: slow[:9]},
				{Name: "wal_bytes", Unit: "bytes", Better: "lower", Record: true, Comparison: cmp(fast[:3], fast[:3], stats.LowerIsBetter)},
			}},
		}}
	var out bytes.Buffer
	if err := comparePrint(&out, res); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "compare.txt", out.String())
}

func TestBisectPrintGolden(t *testing.T) {
	day := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	commit := func(h, subject string, d int) bisect.Commit {
		return bisect.Commit{Hash: h, Subject: subject, Author: "A. Author", Date: day.AddDate(0, 0, d)}
	}
	st := &bisect.State{
		ID:     "0123456789ab",
		Inputs: bisect.Inputs{Metric: "copy_time", Direction: stats.LowerIsBetter},
		Commits: []bisect.Commit{
			commit("1111111111aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "good", 0),
			commit("2222222222aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "slow down COPY", 1),
			commit("3333333333aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "does not build", 2),
			commit("4444444444aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "slow down parsing", 3),
			commit("5555555555aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bad", 4),
		},
		Culprits: []bisect.Culprit{
			{Range: bisect.Range{Parent: 0, First: 1, Last: 1, Result: &bisect.Result{Ratio: 1.2, Lo: 1.15, Hi: 1.25, P: 0.0001, NA: 20, NB: 20}}, Candidates: []int{1}},
			{Range: bisect.Range{Parent: 1, First: 2, Last: 3, Note: "3333333333 does not build", Result: &bisect.Result{Ratio: 1.1, Lo: 1.06, Hi: 1.14, P: 0.001, NA: 30, NB: 30}}, Candidates: []int{2, 3}},
		},
		Unresolved:   []bisect.Range{{Parent: 3, First: 4, Last: 4, Note: "inconclusive within 60 samples"}},
		Outcome:      "culprits",
		Summary:      "2 culprits: copy_time +20.0% and +10.0%.",
		Started:      day,
		Updated:      day.Add(95 * time.Minute),
		BuildsDone:   5,
		SamplesTaken: 240,
		BuildTime:    20 * time.Minute,
		MeasureTime:  70 * time.Minute,
	}
	res := &app.BisectResult{State: st, Finding: &finding.Finding{ID: "regression-0123456789ab"}, ReportDir: "/state/reports/regression-0123456789ab"}
	var out bytes.Buffer
	if err := bisectPrint(&out, res, false); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "bisect.txt", out.String())
	// A queued bisection's result goes to the job's log, a line each.
	var logged []string
	daemonSink(func(s string) { logged = append(logged, s) })(app.Event{Kind: app.KindBisected, Bisected: res})
	var want []string
	for line := range strings.Lines(out.String()) {
		if line = strings.TrimSpace(line); line != "" {
			want = append(want, line)
		}
	}
	if strings.Join(logged, "\n") != strings.Join(want, "\n") {
		t.Errorf("the job log got\n%s\nwant\n%s", strings.Join(logged, "\n"), strings.Join(want, "\n"))
	}
}

func TestNightlyPrintGolden(t *testing.T) {
	res := &nightly.Result{
		Run: store.NightlyRun{Branch: "master", Commit: "abcdef0123456789", Status: nightly.StatusRegression},
		Detail: nightly.Detail{Base: "0123456789abcdef", Results: []nightly.MetricResult{
			{Scenario: "copy-single", Metric: "copy_time", Verdict: "regression", Change: 0.21, Direction: stats.LowerIsBetter, P: 0.0002, N: 20},
			{Scenario: "pgbench", Point: "clients=4", Metric: "tps", Verdict: "same", Change: -0.004, Direction: stats.HigherIsBetter, P: 0.61, N: 30},
		}, ChangePoints: []nightly.Candidate{{Scenario: "pgbench", Metric: "tps", Before: "1111111111", At: "2222222222", Until: "3333333333",
			RelChange: -0.08, Verdict: "regression", Change: -0.07, Direction: stats.HigherIsBetter}},
			Error: "bisecting copy-single copy_time: interrupted"},
	}
	var out bytes.Buffer
	nightlyPrint(&out, res)
	golden.Check(t, "nightly.txt", out.String())
}

func TestStatusPrintGolden(t *testing.T) {
	req, _ := json.Marshal(map[string]any{"key": "bisect-0a1b2c3d4e5f", "class": "bench-2core",
		"request": app.BisectRequest{Scenario: "/srv/pgbisect/configs/scenarios/copy-single.yaml", Good: "REL_15_0", Bad: "REL_16_0", Metric: "copy_time"}})
	req2, _ := json.Marshal(map[string]any{"key": "bisect-ffeeddccbbaa", "class": "bench-2core",
		"request": app.BisectRequest{Scenario: "/srv/copy-concurrent.yaml", Good: "A", Bad: "B", Point: "clients=4"}})
	rep := statusReport{
		Machines: []store.Machine{
			{Name: "bench-a", Class: "bench-2core", Started: printedAt.Add(-26 * time.Hour), Heartbeat: printedAt.Add(-20 * time.Second), JobKey: "bisect-0a1b2c3d4e5f"},
			{Name: "bench-b", Class: "bench-2core", Started: printedAt.Add(-26 * time.Hour), Heartbeat: printedAt.Add(-3 * time.Hour), Stopped: printedAt.Add(-3 * time.Hour)},
		},
		Machine: &machinelock.Holder{PID: 4242, Command: "pgbisect daemon", Started: printedAt.Add(-90 * time.Minute)},
		Jobs: []jobs.Job{
			{ID: 6, Kind: "deliver", Class: "post", State: "completed", Attempt: 2, Machine: "bench-b", Created: printedAt.Add(-5 * time.Hour),
				Error: "1 findings not posted: GET https://api.github.com/...: 502", Args: json.RawMessage(`{"key": "deliver-1", "class": "post", "request": {}}`)},
			{ID: 7, Kind: "bisect", Class: "bench-2core", State: "running", Attempt: 1, Machine: "bench-a", Created: printedAt.Add(-2 * time.Hour), Args: req},
			{ID: 8, Kind: "bisect", Class: "bench-2core", State: "available", Created: printedAt.Add(-30 * time.Minute), Args: req2},
		},
		LastNightly: &store.NightlyRun{Branch: "master", Commit: "abcdef0123456789", Status: "ok", Started: printedAt.Add(-10 * time.Hour)},
		Bisections: []statusBisection{{ID: "0123456789ab", Phase: "search", Updated: printedAt.Add(-time.Minute), Scenario: "copy-single", Metric: "copy_time",
			Good: "1111111111aaaa", Bad: "2222222222bbbb", Builds: 4, Samples: 80}},
	}
	var out bytes.Buffer
	statusPrint(&out, rep, printedAt)
	golden.Check(t, "status.txt", out.String())
}
