package app

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/notify/githubtest"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// answerLab is a history for the bisection engine: commit 9 of 20 makes
// every run 30% slower; samples are deterministic.
type answerLab struct {
	commits []bisect.Commit
	taken   map[int]int
}

func newAnswerLab() *answerLab {
	l := &answerLab{taken: map[int]int{}}
	for i := range 20 {
		l.commits = append(l.commits, bisect.Commit{Hash: fmt.Sprintf("%02x%038x", i, i), Subject: fmt.Sprintf("commit %d", i),
			Key: fmt.Sprintf("key%d", i), Date: time.Date(2026, 1, 1, i, 0, 0, 0, time.UTC)})
	}
	return l
}

func (l *answerLab) Build(_ context.Context, hash string) (bisect.Target, error) {
	return slices.IndexFunc(l.commits, func(c bisect.Commit) bool { return c.Hash == hash }), nil
}

func (l *answerLab) Measure(_ context.Context, t bisect.Target) (float64, error) {
	i := t.(int)
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d", i, l.taken[i])
	l.taken[i]++
	level := 100.0
	if i >= 9 {
		level = 130
	}
	return level * (1 + 0.02*rand.New(rand.NewPCG(h.Sum64(), 7)).NormFloat64()), nil
}

// TestAnswerBeforeExtras: a bisection's answer is saved in the results
// store, its report written, shown (KindAnswer) and posted before its
// extras run; the extras then update the stored finding, the report and
// the post, which is edited, not posted again. Without --post the finding
// is kept and not queued for posting, before and after the extras.
func TestAnswerBeforeExtras(t *testing.T) {
	const token = "ghp_answerFirstTOKEN"
	hub := githubtest.New(t, token)
	st := storetest.Store(t)
	ctx := context.Background()
	l := newAnswerLab()
	in := bisect.Inputs{Repo: "test", Good: l.commits[0].Hash, Bad: l.commits[19].Hash, Scenario: "/x/copy-single.yaml",
		Metric: "elapsed", Direction: stats.LowerIsBetter, Thresholds: stats.Thresholds{Alpha: 0.05, MinEffect: 0.05, MaxSamples: 20}}
	s, err := bisect.NewState(in, l.commits, time.Date(2026, 1, 30, 2, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if err := (&bisect.Engine{Builder: l, Measurer: l}).Run(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s.Outcome != bisect.OutcomeFound {
		t.Fatalf("the bisection found nothing: %s", s.Summary)
	}
	stateDir := t.TempDir()
	a, err := Open(ctx, Options{StateDir: stateDir, Branch: "master", GitHub: notify.GitHubOptions{Repo: "pg/bot", APIURL: hub.URL(),
		Labels: hub.Labels, Token: token}}, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, post := range []bool{true, false} {
		t.Run(fmt.Sprintf("post=%v", post), func(t *testing.T) {
			f := finding.FromBisection(s, finding.Report{Branch: "master"})
			if !post {
				f.ID += "-kept"
			}
			var events []Event
			sink := Sink(func(e Event) { events = append(events, e) })
			ran, issues := false, len(hub.Issues())
			extras := func(f *finding.Finding) {
				ran = true
				// The answer is out already: saved, its report written,
				// shown, and posted when asked for.
				cur, err := st.LoadFinding(ctx, f.ID)
				if err != nil {
					t.Fatalf("the finding is not saved before the extras: %v", err)
				}
				if len(cur.Finding.Reverts) != 0 || cur.Finding.Culprits[0].Commit.Hash != l.commits[9].Hash {
					t.Errorf("saved finding before the extras: %+v", cur.Finding.Culprits)
				}
				if _, err := os.Stat(filepath.Join(notify.ReportsDir(stateDir), f.ID, notify.ReportMarkdown)); err != nil {
					t.Errorf("no report before the extras: %v", err)
				}
				if i := slices.IndexFunc(events, func(e Event) bool { return e.Kind == KindAnswer }); i < 0 ||
					!strings.Contains(events[i].Text, l.commits[9].Short()) || events[i].Finding != f.ID {
					t.Errorf("the answer was not shown before the extras: %+v", events)
				}
				if posted := len(cur.Posts) > 0; posted != post || len(hub.Issues())-issues != map[bool]int{true: 1, false: 0}[post] {
					t.Errorf("posted %v (%d issues) before the extras, asked %v", posted, len(hub.Issues()), post)
				}
				if pend, _ := st.Pending(ctx); slices.ContainsFunc(pend, func(o finding.Outgoing) bool { return o.Finding.ID == f.ID }) {
					t.Errorf("finding %s waits to be posted before the extras (post %v)", f.ID, post)
				}
				f.Reverts = []finding.RevertCheck{{Culprits: []finding.Commit{f.Culprits[0].Commit}, Skipped: "an extra taken after the answer"}}
			}
			if _, err := a.answerFirst(ctx, s, f, BisectRequest{Post: post}, sink, extras); err != nil {
				t.Fatal(err)
			}
			if !ran {
				t.Fatal("the extras did not run")
			}
			cur, err := st.LoadFinding(ctx, f.ID)
			if err != nil || len(cur.Finding.Reverts) != 1 {
				t.Fatalf("the stored finding was not updated by the extras: %v", err)
			}
			md, err := os.ReadFile(filepath.Join(notify.ReportsDir(stateDir), f.ID, notify.ReportMarkdown))
			if err != nil || !strings.Contains(string(md), "an extra taken after the answer") {
				t.Errorf("the report was not updated by the extras: %v", err)
			}
			if pend, _ := st.Pending(ctx); slices.ContainsFunc(pend, func(o finding.Outgoing) bool { return o.Finding.ID == f.ID }) {
				t.Errorf("finding %s waits to be posted after the extras", f.ID)
			}
			if !post {
				return
			}
			if is := hub.Issues(); len(is) != 1 || !strings.Contains(is[0].Body, "an extra taken after the answer") || hub.IssueEdits != 1 {
				t.Errorf("the post was not edited once with the extras (%d issues, %d edits)", len(is), hub.IssueEdits)
			}
		})
	}
}
