package store

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// The tests share one private cluster, started by TestMain through the same
// Open path users take with no database configured. Each data test runs in
// a transaction rolled back in t.Cleanup (testStore); tests that need their
// own connections or their own migrations get a schema of their own
// (testSchema).
var (
	shared      *Store
	noServer    error // why the cluster could not be started
	schemaCount atomic.Int32
)

func TestMain(m *testing.M) {
	if os.Getenv(followDBEnv) != "" {
		os.Exit(followerMain()) // a second process of TestFollowEventsFromAnotherProcess
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := FindBinDir(""); err != nil {
		noServer = err
		return m.Run()
	}
	initdbNoSync = true
	dir, err := os.MkdirTemp("", "pgbisect-store-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shared, err = Open(ctx, Config{StateDir: dir, RunAs: "postgres", StopOnClose: true, Log: testLog()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the test results cluster: %v\n", err)
		return 1
	}
	defer shared.Close()
	return m.Run()
}

func testLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// needServer skips a test when PostgreSQL's server binaries are missing,
// except in CI, where that is a broken setup and fails.
func needServer(t testing.TB) {
	t.Helper()
	if noServer == nil {
		return
	}
	citest.Unavailable(t, "no PostgreSQL server binaries (run scripts/setup-debian.sh): %v", noServer)
}

// testStore returns a Store bound to a transaction of the shared cluster
// that is rolled back when the test ends, so tests see an empty, migrated
// schema and leave nothing behind.
func testStore(t *testing.T) *Store {
	t.Helper()
	needServer(t)
	ctx := context.Background()
	tx, err := shared.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return &Store{db: tx, log: testLog()}
}

// testSchema creates an empty schema dropped when the test ends and returns
// a URL whose connections use it (search_path), for tests that need their
// own pools or their own migrations.
func testSchema(t *testing.T) string {
	t.Helper()
	needServer(t)
	ctx := context.Background()
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), schemaCount.Add(1))
	if _, err := shared.pool.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := shared.pool.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("dropping test schema: %v", err)
		}
	})
	return shared.cluster.URL() + "&search_path=" + name
}

// stateDir returns a state directory the cluster's user can reach
// (t.TempDir makes 0700 directories).
func stateDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{d, filepath.Dir(d)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}
