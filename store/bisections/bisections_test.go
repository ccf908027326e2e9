package bisections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/store"
)

var (
	testDB   *store.Store
	noServer error
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	if _, err := store.FindBinDir(""); err != nil {
		noServer = err
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "pgbisect-bisections-test-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	testDB, err = store.Open(ctx, store.Config{StateDir: dir, RunAs: "postgres", StopOnClose: true,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the test results cluster: %v\n", err)
		return 1
	}
	defer testDB.Close()
	return m.Run()
}

// TestSaveLoad: a state saved at each step is loaded back whole, the row's
// status follows the phase, and an unknown id is bisect.ErrNotFound.
func TestSaveLoad(t *testing.T) {
	if noServer != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL server binaries are required in CI (run scripts/setup-debian.sh): %v", noServer)
		}
		t.Skipf("no PostgreSQL server binaries (run scripts/setup-debian.sh): %v", noServer)
	}
	ctx := context.Background()
	db := New(testDB)
	commits := []bisect.Commit{
		{Hash: "1111111111111111111111111111111111111111", Subject: "good", Key: "k1"},
		{Hash: "2222222222222222222222222222222222222222", Subject: "middle", Key: "k2"},
		{Hash: "3333333333333333333333333333333333333333", Subject: "bad", Key: "k3"},
	}
	in := bisect.Inputs{Repo: "/src/postgres", Good: commits[0].Hash, Bad: commits[2].Hash, Scenario: "copy-single", Metric: "elapsed"}
	s, err := bisect.NewState(in, commits, time.Date(2026, 1, 30, 2, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Save(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Samples["k1"] = []float64{10, 10.1, 9.9}
	s.Phase = bisect.PhaseDone
	if err := db.Save(ctx, s); err != nil {
		t.Fatal(err)
	}
	got, err := db.Load(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != s.ID || got.Phase != bisect.PhaseDone || len(got.Commits) != 3 || got.Commits[1].Subject != "middle" ||
		len(got.Samples["k1"]) != 3 || got.Inputs.Scenario != "copy-single" {
		t.Fatalf("loaded %+v", got)
	}
	if _, status, err := testDB.LoadBisection(ctx, s.ID); err != nil || status != string(bisect.PhaseDone) {
		t.Fatalf("stored status %q, %v", status, err)
	}
	if _, err := db.Load(ctx, "no-such-bisection"); !errors.Is(err, bisect.ErrNotFound) {
		t.Fatalf("got %v, want bisect.ErrNotFound", err)
	}
}
