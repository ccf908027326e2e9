// Package storetest gives the tests of a package one results store to
// share: a private cluster in a temporary directory, started on first use
// through the same store.Open path pgbisect takes with no database
// configured, and stopped (and removed) by Close. A test binary killed
// before Close leaves its store running; the next one to start a store
// stops and removes it (sweep).
//
// Without PostgreSQL's server binaries a test is skipped, except under
// CI=true, where that is a broken setup and fails. With them, a store that
// does not start or migrate fails the test.
package storetest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/pgbisect/pgbisect/internal/testkit/citest"
	"github.com/pgbisect/pgbisect/store"
)

var shared struct {
	once  sync.Once
	st    *store.Store
	err   error
	dir   string
	owner *flock.Flock // held while this process uses dir
}

// prefix names the shared stores' directories in os.TempDir().
const prefix = "pgbisect-test-results-"

// ownerLock is the file in a store's directory that its test process holds
// locked for as long as it runs; the kernel drops the lock when the
// process dies, however it dies.
const ownerLock = "owner.lock"

// Store returns the package's shared results store, starting it on the
// first call. Tests keep apart by their own names (branches, IDs).
func Store(t testing.TB) *store.Store {
	t.Helper()
	st, err := start()
	if err != nil {
		if _, binErr := store.FindBinDir(""); binErr == nil {
			// The server is there: a failure to start or migrate the
			// store is the code's, never a reason to skip.
			t.Fatalf("starting the test results store: %v", err)
		}
		unavailable(t, err)
	}
	return st
}

// NeedServer skips t when PostgreSQL's server binaries are missing (fails
// it under CI=true), for tests that start clusters of their own.
func NeedServer(t testing.TB) {
	t.Helper()
	if _, err := store.FindBinDir(""); err != nil {
		unavailable(t, err)
	}
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	citest.Unavailable(t, "no PostgreSQL server (run scripts/setup-debian.sh): %v", err)
}

// Start starts the shared store without a test, for a TestMain; it returns
// why it could not.
func Start() (*store.Store, error) { return start() }

func start() (*store.Store, error) {
	shared.once.Do(func() {
		if _, err := store.FindBinDir(""); err != nil {
			shared.err = err
			return
		}
		sweep()
		dir, err := os.MkdirTemp("", prefix)
		if err == nil {
			shared.owner = flock.New(filepath.Join(dir, ownerLock))
			err = shared.owner.Lock()
		}
		if err == nil {
			// The server runs as an unprivileged user, which must reach it.
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
	return shared.st, shared.err
}

// Close stops the shared store, if it was started, and removes its
// directory. Call it from TestMain after m.Run.
func Close() {
	if shared.st != nil {
		shared.st.Close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	if shared.owner != nil {
		_ = shared.owner.Unlock()
	}
}

// sweep stops and removes the stores of test processes that died without
// Close (killed, timed out): those whose owner lock is free. A directory
// without an owner lock is swept once it is a minute old (it is either
// from before owner locks or a process that died as it began).
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	for _, dir := range dirs {
		if !stale(dir) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		c, err := store.NewCluster(dir, "postgres", nil)
		if err == nil {
			err = c.Stop(ctx)
		}
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "storetest: the results store a dead test process left in %s: %v (left as it is)\n", dir, err)
			continue
		}
		os.RemoveAll(dir)
	}
}

// stale reports whether dir's owner is gone.
func stale(dir string) bool {
	lock := filepath.Join(dir, ownerLock)
	if _, err := os.Stat(lock); err != nil {
		fi, err := os.Stat(dir)
		return err == nil && time.Since(fi.ModTime()) > time.Minute
	}
	l := flock.New(lock)
	ok, err := l.TryLock()
	if err != nil || !ok {
		return false
	}
	_ = l.Unlock()
	return true
}

// Main runs the tests of m and then Close: a package's whole TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Close()
	os.Exit(code)
}
