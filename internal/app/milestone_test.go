package app

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
)

// lab is a bisection's builds and measurements without PostgreSQL: commit
// i takes level[i] with 2% noise.
type lab struct {
	index map[string]int
	level []float64
	rng   *rand.Rand
}

func (l *lab) Build(_ context.Context, hash string) (bisect.Target, error) { return l.index[hash], nil }
func (l *lab) Measure(_ context.Context, t bisect.Target) (float64, error) {
	return 100 * l.level[t.(int)] * (1 + 0.02*l.rng.NormFloat64()), nil
}

// TestMilestonesOfABisection: a real bisection engine's decisions, read as
// the App's events, give the milestones a GitHub reply is edited at:
// started is the App's own, then the endpoints verified once, each
// culprit confirmed, the outcome; nothing else.
func TestMilestonesOfABisection(t *testing.T) {
	const n = 12
	commits := make([]bisect.Commit, n)
	l := &lab{index: map[string]int{}, rng: rand.New(rand.NewPCG(1, 2))}
	level := 1.0
	for i := range commits {
		if i == 5 || i == 9 {
			level *= 1.25 // two culprits
		}
		h := fmt.Sprintf("%02d", i) + strings.Repeat("ab", 19) // short hashes differ
		commits[i] = bisect.Commit{Hash: h, Subject: fmt.Sprintf("commit %d", i), Key: h, Date: time.Date(2026, 1, 1, i, 0, 0, 0, time.UTC)}
		l.index[h] = i
		l.level = append(l.level, level)
	}
	st, err := bisect.NewState(bisect.Inputs{Repo: "lab", Good: commits[0].Hash, Bad: commits[n-1].Hash, Scenario: "lab", Metric: "elapsed",
		Direction: stats.LowerIsBetter}, commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// Followed as it runs: the events of each step, as Bisect emits them.
	var events []Event
	shown, endpoints := 0, false
	eng := &bisect.Engine{Builder: l, Measurer: l, Progress: func(bisect.Status) {
		events = append(events, engineEvents(st, shown, &endpoints)...)
		shown = len(st.Events)
	}}
	if err := eng.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	events = append(events, engineEvents(st, shown, &endpoints)...)
	var lines []string
	for _, e := range events {
		if m := MilestoneOf(e); m.Line != "" {
			lines = append(lines, m.Line)
		}
	}
	got := strings.Join(lines, "\n")
	want := []string{"endpoints verified: " + commits[0].Short() + ".." + commits[n-1].Short() + ": regression",
		"culprit: " + commits[5].Short() + " commit 5 (regression", "culprit: " + commits[9].Short() + " commit 9 (regression", "outcome: "}
	t.Logf("milestones:\n%s", got)
	if len(lines) != len(want) {
		t.Fatalf("milestones:\n%s\nwant %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) && !(i == 1 || i == 2) {
			t.Errorf("milestone %d %q, want %q", i, lines[i], w)
		}
	}
	// The culprits may be confirmed in either order.
	for _, w := range want[1:3] {
		if !strings.Contains(got, w) {
			t.Errorf("no milestone %q in:\n%s", w, got)
		}
	}
	if m := MilestoneOf(Event{Kind: KindDone, Error: "building x: failed\nlog"}); !m.End || !m.Failed || m.Line != "failed: building x: failed" {
		t.Errorf("failed end: %+v", m)
	}
	if m := MilestoneOf(Event{Kind: KindDone, Finding: "f1"}); !m.End || m.Failed || m.Finding != "f1" {
		t.Errorf("end: %+v", m)
	}
}
