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

// curveLab is lab at two points: commit 5 slows p=2 only, commit 9 both.
type curveLab struct{ *lab }

func (l curveLab) MeasureAt(_ context.Context, t bisect.Target, point string) (float64, error) {
	i, level := t.(int), 1.0
	if i >= 5 && point == "p=2" {
		level *= 1.25
	}
	if i >= 9 {
		level *= 1.25
	}
	return 100 * level * (1 + 0.02*l.rng.NormFloat64()), nil
}

// TestMilestonesOfACurve: a bisection of several points reports its
// endpoints verified once, when every point has its verdict, and each
// culprit its check confirmed, with the point; curve checks blame
// nothing.
func TestMilestonesOfACurve(t *testing.T) {
	const n = 12
	commits := make([]bisect.Commit, n)
	l := curveLab{&lab{index: map[string]int{}, rng: rand.New(rand.NewPCG(3, 4))}}
	for i := range commits {
		h := fmt.Sprintf("%02d", i) + strings.Repeat("cd", 19)
		commits[i] = bisect.Commit{Hash: h, Subject: fmt.Sprintf("commit %d", i), Key: h, Date: time.Date(2026, 1, 1, i, 0, 0, 0, time.UTC)}
		l.index[h] = i
	}
	st, err := bisect.NewCurveState(bisect.Inputs{Repo: "lab", Good: commits[0].Hash, Bad: commits[n-1].Hash, Scenario: "lab", Metric: "elapsed",
		Direction: stats.LowerIsBetter, Points: []string{"p=1", "p=2"}}, commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	shown, endpoints := 0, endpointsJudged(st)
	eng := &bisect.Engine{Builder: l, Measurer: l, Progress: func(bisect.Status) {
		events = append(events, engineEvents(st, shown, &endpoints)...)
		shown = len(st.Events)
	}}
	if err := eng.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	events = append(events, engineEvents(st, shown, &endpoints)...)
	var lines []string
	count := map[string]int{}
	for _, e := range events {
		if m := MilestoneOf(e); m.Line != "" {
			lines = append(lines, m.Line)
			switch {
			case strings.HasPrefix(m.Line, "endpoints verified"):
				count["endpoints"]++
			case strings.HasPrefix(m.Line, "culprit: "+commits[5].Short()) && strings.Contains(m.Line, "at p=2"):
				count["5"]++
			case strings.HasPrefix(m.Line, "culprit: "+commits[9].Short()):
				count["9"]++
			case strings.HasPrefix(m.Line, "culprit: "):
				count["other"]++
			}
		}
	}
	t.Logf("milestones:\n%s", strings.Join(lines, "\n"))
	for _, e := range st.Events {
		if e.Point != "" != strings.HasPrefix(e.Message, "["+e.Point+"] ") {
			t.Errorf("event %q has point %q: a search's event carries its point and says it", e.Message, e.Point)
		}
	}
	if count["endpoints"] != 1 || count["5"] != 1 || count["9"] < 1 || count["other"] != 0 {
		t.Errorf("milestones counted %v; want the endpoints once, commit 5 at p=2 once, commit 9, nothing else", count)
	}
}

// TestSearchOf: an event of a bisection of several points is its
// search's by its Point; one saved before events had a Point, by its
// "[POINT] " prefix; the bisection's own events are the bisection's.
func TestSearchOf(t *testing.T) {
	commits := []bisect.Commit{{Hash: strings.Repeat("a", 40), Key: "a"}, {Hash: strings.Repeat("b", 40), Key: "b"}}
	st, err := bisect.NewCurveState(bisect.Inputs{Repo: "lab", Good: commits[0].Hash, Bad: commits[1].Hash, Scenario: "lab", Metric: "elapsed",
		Direction: stats.LowerIsBetter, Points: []string{"p=1", "p=2"}}, commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	p2 := st.Curve.Searches[1]
	for _, tc := range []struct {
		e    bisect.Event
		want *bisect.State
	}{
		{bisect.Event{Point: "p=2", Message: "verdict: same"}, p2},
		{bisect.Event{Message: "[p=2] verdict: same"}, p2},
		{bisect.Event{Point: "p=1", Message: "[p=2] a message that quotes another point"}, st.Curve.Searches[0]},
		{bisect.Event{Message: "outcome: found"}, st},
	} {
		if got := searchOf(st, tc.e); got != tc.want {
			t.Errorf("searchOf(%+v) = the search of %q, want %q", tc.e, got.Inputs.Point, tc.want.Inputs.Point)
		}
	}
}
