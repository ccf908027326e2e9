package outbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func finding(id string) *notify.Finding {
	cmp := notify.Comparison{Metric: "elapsed", Direction: notify.LowerIsBetter, Good: notify.Side{Median: 10, N: 12},
		Bad: notify.Side{Median: 11.04, N: 15}, Ratio: 1.104, RatioLow: 1.09, RatioHigh: 1.12, P: 0.0004, Verdict: "regression"}
	return &notify.Finding{
		ID: id, Kind: notify.Regression, Branch: "master", Scenario: "copy-single", Metric: "elapsed",
		Culprits: []notify.Culprit{
			{Commit: notify.Commit{Hash: "9f8377f7a27a0a5b4b2d2b9f0b0e5b1d7c6a5e4f"}, Comparisons: []notify.Comparison{cmp}},
			{Commit: notify.Commit{Hash: "faff8f8e47f18c7d8a8b6a3e0f1c2d3e4f5a6b7c"}},
		},
		Started: time.Date(2026, 1, 30, 2, 15, 0, 0, time.UTC),
	}
}

// TestOutbox: a finding with two culprits (two targets) stays pending until
// both are posted, is then settled, and its posts survive a reload.
func TestOutbox(t *testing.T) {
	testDB := storetest.Store(t)
	ctx := context.Background()
	ob := New(testDB)
	f := finding(notify.NewID(time.Date(2026, 1, 30, 2, 15, 0, 0, time.UTC), "copy-single", "9f8377f7a2"))
	if err := ob.Add(ctx, f); err != nil {
		t.Fatal(err)
	}
	targets := notify.Targets(f)
	if len(targets) != 2 {
		t.Fatalf("fixture has %d targets, want 2", len(targets))
	}
	pending := func() []notify.Outgoing {
		t.Helper()
		out, err := ob.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var mine []notify.Outgoing
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
	if err := ob.MarkPosted(ctx, f.ID, notify.Post{Key: targets[0].Key, Action: notify.ActionCreated, Repo: "o/r", Issue: 7, At: at}); err != nil {
		t.Fatal(err)
	}
	p := pending()
	if len(p) != 1 || len(p[0].Posts) != 1 || p[0].Posts[0].Key != targets[0].Key || p[0].Posts[0].Issue != 7 || !p[0].Posts[0].At.Equal(at) {
		t.Fatalf("after one post: %+v", p)
	}
	if left := notify.Remaining(p[0].Finding, p[0].Posts); len(left) != 1 || left[0].Key != targets[1].Key {
		t.Fatalf("remaining %+v", left)
	}
	if err := ob.MarkPosted(ctx, f.ID, notify.Post{Key: targets[1].Key, Action: notify.ActionCreated, Repo: "o/r", Issue: 8, At: at}); err != nil {
		t.Fatal(err)
	}
	if p := pending(); len(p) != 0 {
		t.Fatalf("after both posts: still pending %+v", p)
	}
	sf, err := testDB.Finding(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !sf.Settled || sf.Ratio != 1.104 || sf.N != 12 || len(sf.Culprits) != 2 {
		t.Fatalf("stored summary %+v", sf)
	}
	o, err := ob.Load(ctx, f.ID)
	if err != nil || len(o.Posts) != 2 || o.Finding.Scenario != "copy-single" {
		t.Fatalf("Load: %+v %v", o, err)
	}
	if _, err := ob.Load(ctx, "nope"); !errors.Is(err, notify.ErrNotFound) {
		t.Fatalf("Load of a missing finding: %v", err)
	}
}

// TestLockExcludes: a second poster waits for the first's lock.
func TestLockExcludes(t *testing.T) {
	testDB := storetest.Store(t)
	ctx := context.Background()
	ob := New(testDB)
	unlock, err := ob.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := ob.Lock(ctx)
		if err == nil {
			u()
		}
		got <- err
	}()
	// The second Lock must still be waiting: a short context proves it
	// cannot take the lock while the first is held.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if u, err := ob.Lock(short); err == nil {
		u()
		t.Fatal("the posting lock was taken twice")
	}
	unlock()
	if err := <-got; err != nil {
		t.Fatalf("waiting poster: %v", err)
	}
}

// TestImport moves a file outbox, posts and all, into the store once.
func TestImport(t *testing.T) {
	testDB := storetest.Store(t)
	ctx := context.Background()
	ob := New(testDB)
	files := &notify.Dir{Path: filepath.Join(t.TempDir(), "findings")}
	if n, err := ob.Import(ctx, files); n != 0 || err != nil {
		t.Fatalf("a missing directory: %d, %v", n, err)
	}
	f := finding(notify.NewID(time.Date(2026, 2, 1, 2, 15, 0, 0, time.UTC), "copy-single", "1234567890"))
	if err := files.Add(ctx, f); err != nil {
		t.Fatal(err)
	}
	key := notify.Targets(f)[0].Key
	if err := files.MarkPosted(ctx, f.ID, notify.Post{Key: key, Action: notify.ActionCreated, Repo: "o/r", Issue: 3}); err != nil {
		t.Fatal(err)
	}
	if n, err := ob.Import(ctx, files); n != 1 || err != nil {
		t.Fatalf("import: %d, %v", n, err)
	}
	o, err := ob.Load(ctx, f.ID)
	if err != nil || len(o.Posts) != 1 || o.Posts[0].Key != key || o.Posts[0].Issue != 3 {
		t.Fatalf("imported: %+v %v", o, err)
	}
	if _, err := os.Stat(files.Path + ".imported"); err != nil {
		t.Errorf("the directory was not renamed: %v", err)
	}
	if n, err := ob.Import(ctx, files); n != 0 || err != nil {
		t.Errorf("a second import: %d, %v", n, err)
	}
}
