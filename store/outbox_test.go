package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

func newFinding(id string) *finding.Finding {
	cmp := finding.Comparison{Metric: "elapsed", Direction: stats.LowerIsBetter, Good: finding.Side{Median: 10, N: 12},
		Bad: finding.Side{Median: 11.04, N: 15}, Ratio: 1.104, RatioLow: 1.09, RatioHigh: 1.12, P: 0.0004, Verdict: "regression"}
	return &finding.Finding{
		ID: id, Kind: finding.Regression, Branch: "master", Scenario: "copy-single", Metric: "elapsed",
		Culprits: []finding.Culprit{
			{Commit: finding.Commit{Hash: "9f8377f7a27a0a5b4b2d2b9f0b0e5b1d7c6a5e4f"}, Comparisons: []finding.Comparison{cmp}},
			{Commit: finding.Commit{Hash: "faff8f8e47f18c7d8a8b6a3e0f1c2d3e4f5a6b7c"}},
		},
		Started: time.Date(2026, 1, 30, 2, 15, 0, 0, time.UTC),
	}
}

// TestOutbox: a finding with two culprits (two targets) stays pending until
// both are posted, is then settled, and its posts survive a reload.
func TestOutbox(t *testing.T) {
	st := testStore(t)
	ctx := context.Background()
	ob := st
	f := newFinding(finding.NewID(time.Date(2026, 1, 30, 2, 15, 0, 0, time.UTC), "copy-single", "9f8377f7a2"))
	if err := ob.Add(ctx, f); err != nil {
		t.Fatal(err)
	}
	targets := finding.TargetKeys(f)
	if len(targets) != 2 {
		t.Fatalf("fixture has %d targets, want 2", len(targets))
	}
	pending := func() []finding.Outgoing {
		t.Helper()
		out, err := ob.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var mine []finding.Outgoing
		for _, o := range out {
			if o.Finding.ID == f.ID {
				mine = append(mine, o)
			}
		}
		return mine
	}
	if p := pending(); len(p) != 1 || len(p[0].Posts) != 0 || len(p[0].Finding.Culprits) != 2 {
		t.Fatalf("before posting: %+v", p)
	}
	at := time.Date(2026, 1, 30, 3, 0, 0, 0, time.UTC)
	if err := ob.MarkPosted(ctx, f.ID, finding.Post{Key: targets[0], Action: finding.ActionCreated, Repo: "o/r", Issue: 7, At: at}); err != nil {
		t.Fatal(err)
	}
	p := pending()
	if len(p) != 1 || len(p[0].Posts) != 1 || p[0].Posts[0].Key != targets[0] || p[0].Posts[0].Issue != 7 || !p[0].Posts[0].At.Equal(at) {
		t.Fatalf("after one post: %+v", p)
	}
	if left := finding.Unposted(p[0].Finding, p[0].Posts); len(left) != 1 || left[0] != targets[1] {
		t.Fatalf("remaining %+v", left)
	}
	if err := ob.MarkPosted(ctx, f.ID, finding.Post{Key: targets[1], Action: finding.ActionCreated, Repo: "o/r", Issue: 8, At: at}); err != nil {
		t.Fatal(err)
	}
	if p := pending(); len(p) != 0 {
		t.Fatalf("after both posts: still pending %+v", p)
	}
	sf, err := st.Finding(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !sf.Settled || sf.Ratio != 1.104 || sf.N != 12 || len(sf.Culprits) != 2 {
		t.Fatalf("stored summary %+v", sf)
	}
	o, err := ob.LoadFinding(ctx, f.ID)
	if err != nil || len(o.Posts) != 2 || o.Finding.Scenario != "copy-single" {
		t.Fatalf("Load: %+v %v", o, err)
	}
	if _, err := ob.LoadFinding(ctx, "nope"); !errors.Is(err, finding.ErrNotFound) {
		t.Fatalf("Load of a missing finding: %v", err)
	}
}

// TestLockExcludes: a second poster waits for the first's lock.
func TestLockExcludes(t *testing.T) {
	needServer(t) // the lock needs connections of its own: the shared store, not a transaction
	ctx := context.Background()
	ob := shared
	unlock, err := ob.Lock(ctx, PostLock)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := ob.Lock(ctx, PostLock)
		if err == nil {
			u()
		}
		got <- err
	}()
	// The second Lock must still be waiting: a short context proves it
	// cannot take the lock while the first is held.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if u, err := ob.Lock(short, PostLock); err == nil {
		u()
		t.Fatal("the posting lock was taken twice")
	}
	unlock()
	if err := <-got; err != nil {
		t.Fatalf("waiting poster: %v", err)
	}
}

// TestImport loads a state directory as pgbisect kept it before the results
// store (testdata/oldstate: a bisection saved with the numeric direction of
// the time, a finding with one of its two issues posted, a finding without
// culprits, a lock file) into the store, and a second import changes
// nothing.
func TestImport(t *testing.T) {
	st := testStore(t)
	ctx := context.Background()
	dir := t.TempDir()
	if n, err := st.Import(ctx, filepath.Join(dir, "nothing")); n != (Imported{}) || err != nil {
		t.Fatalf("a missing directory: %+v, %v", n, err)
	}
	if err := os.CopyFS(dir, os.DirFS("testdata/oldstate")); err != nil {
		t.Fatal(err)
	}
	n, err := st.Import(ctx, dir)
	if err != nil || n != (Imported{Bisections: 1, Findings: 2, Posts: 1}) {
		t.Fatalf("import: %+v, %v", n, err)
	}
	b, err := st.LoadBisection(ctx, "eb90e44cce47")
	if err != nil || b.Inputs.Direction != stats.HigherIsBetter || len(b.Samples["k1"]) != 3 || b.Phase != bisect.PhaseEndpoints {
		t.Fatalf("imported bisection: %+v, %v", b, err)
	}
	id := "20260130T021500Z-copy-single-9f8377f7a2"
	o, err := st.LoadFinding(ctx, id)
	if err != nil || len(o.Posts) != 1 || o.Posts[0].Key != "[master] 9f8377f7a2:" || o.Posts[0].Issue != 3 || len(o.Finding.Culprits) != 2 {
		t.Fatalf("imported finding: %+v, %v", o, err)
	}
	pending, err := st.Pending(ctx)
	if err != nil || len(pending) != 1 || pending[0].Finding.ID != id {
		t.Fatalf("pending after import: %+v, %v (want the finding with an issue left to post)", pending, err)
	}
	// The bisection resumes and moves on; importing again leaves it be.
	b.Phase = bisect.PhaseSearch
	if err := st.SaveBisection(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Import(ctx, dir); err != nil || n != (Imported{Present: 3}) {
		t.Fatalf("a second import: %+v, %v", n, err)
	}
	if b, err := st.LoadBisection(ctx, "eb90e44cce47"); err != nil || b.Phase != bisect.PhaseSearch {
		t.Fatalf("the second import replaced the newer state: %+v, %v", b, err)
	}
	if o, err := st.LoadFinding(ctx, id); err != nil || len(o.Posts) != 1 {
		t.Fatalf("posts after a second import: %+v, %v", o, err)
	}
	// A damaged file is an error naming it.
	if err := os.WriteFile(filepath.Join(dir, "bisections", "x.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(ctx, dir); err == nil || !strings.Contains(err.Error(), "x.json") {
		t.Errorf("a damaged state file: %v", err)
	}
}
