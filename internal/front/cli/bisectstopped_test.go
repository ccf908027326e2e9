package cli

import (
	"bytes"
	"encoding/json"
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

// TestBisectStoppedPrintGolden runs the planner over a made-up range with
// a culprit at commit 6 of 0..8, a minute per sample and two per build,
// until its time bound stops it, and prints the partial answer.
func TestBisectStoppedPrintGolden(t *testing.T) {
	day := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	var commits []bisect.Commit
	for i := range 9 {
		h := fmt.Sprintf("%d%d%d%d%d%d%d%d%d%daaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", i, i, i, i, i, i, i, i, i, i)
		commits = append(commits, bisect.Commit{Hash: h, Subject: fmt.Sprintf("commit %d", i), Author: "A. Author",
			Date: day.AddDate(0, 0, i-9), Key: "key" + h[:10]})
	}
	in := bisect.Inputs{Repo: "/repo", Good: commits[0].Hash, Bad: commits[8].Hash, Scenario: "copy-single", Metric: "copy_time",
		Unit: "s", Direction: stats.LowerIsBetter}
	st, err := bisect.NewState(in, commits, day)
	if err != nil {
		t.Fatal(err)
	}
	st.MaxTime = 90 * time.Minute
	now := day
	build := func(i int) {
		if st.Builds[commits[i].Key] == nil {
			st.Builds[commits[i].Key] = &bisect.BuildResult{Hash: commits[i].Hash, Duration: 2 * time.Minute}
			st.BuildsDone++
			st.BuildTime += 2 * time.Minute
			st.Spent += 2 * time.Minute
			now = now.Add(2 * time.Minute)
		}
	}
	for n := 0; ; n++ {
		act := st.Next(now)
		if act.Kind == bisect.ActDone {
			break
		}
		build(act.Commit)
		if act.Kind == bisect.ActSample {
			level := 1.0
			if act.Commit >= 6 {
				level = 1.2
			}
			st.Record(act, 10*level*(1+0.03*math.Sin(1.7*float64(n))), time.Minute)
			st.Spent += time.Minute
			now = now.Add(time.Minute)
		}
	}
	st.Updated = now
	if st.Outcome != bisect.OutcomeTimeBound || st.StoppedIn != bisect.PhaseSearch {
		t.Fatalf("outcome %s, stopped in %q: want the bound to stop the search (%s)", st.Outcome, st.StoppedIn, st.Summary)
	}
	f := finding.FromBisection(st, finding.Report{})
	if f.Stopped == nil || f.Kind != finding.Inconclusive {
		t.Fatalf("finding %s, stopped %v: want an inconclusive finding with its partial answer", f.Kind, f.Stopped)
	}
	var out bytes.Buffer
	if err := bisectPrint(&out, &app.BisectResult{State: st, Finding: f, ReportDir: "/state/reports/" + f.ID}, false); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "bisect-stopped.txt", out.String())
	data, err := json.MarshalIndent(f.Stopped, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "bisect-stopped.json", string(data)+"\n")
}
