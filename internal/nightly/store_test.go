package nightly

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/store"
)

var testNow = time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC)

var shared struct {
	once sync.Once
	st   *store.Store
	err  error
	dir  string
}

// testStore returns the results store the package's tests share: a private
// cluster started once, as pgbisect starts it with no database configured.
// Tests keep apart by using their own branch names.
func testStore(t *testing.T) *store.Store {
	t.Helper()
	shared.once.Do(func() {
		if _, err := store.FindBinDir(""); err != nil {
			shared.err = err
			return
		}
		dir, err := os.MkdirTemp("", "pgbisect-nightly-test-")
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			shared.err = err
			return
		}
		shared.dir = dir
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		shared.st, shared.err = store.Open(ctx, store.Config{StateDir: dir, RunAs: "postgres", StopOnClose: true,
			Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	})
	if shared.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the results store needs PostgreSQL's server binaries in CI (run scripts/setup-debian.sh): %v", shared.err)
		}
		t.Skipf("no results store (run scripts/setup-debian.sh): %v", shared.err)
	}
	return shared.st
}

// closeStore stops the shared cluster; TestMain calls it.
func closeStore() {
	if shared.st != nil {
		shared.st.Close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}
