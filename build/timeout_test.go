package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// TestBuildTimeout builds a tree whose configure never finishes: Build must
// stop it at the builder's Timeout with a *TimeoutError naming the setting
// and the log, leave no process behind, and not record the commit as broken.
func TestBuildTimeout(t *testing.T) {
	if err := checkTools(context.Background(), Options{}); err != nil {
		citest.Unavailable(t, "build tools missing: %v", err)
	}
	r := newTestRepo(t)
	r.exec = map[string]bool{"configure": true}
	c := r.commit("configure hangs", nil, map[string]string{
		"configure":    "#!/bin/sh\necho configuring\nexec sleep 600\n",
		"src/Makefile": "all:\n",
	})
	// Not t.TempDir(): its parent is 0700, closed to the server's user
	// that preflight checks for when run as root.
	state, err := os.MkdirTemp("", "pgbisect-build-timeout-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	b := NewBuilder(r.open(), state, Options{}, nil, nil)
	b.Timeout = 2 * time.Second
	_, err = b.Build(context.Background(), c)
	var te *TimeoutError
	if !errors.As(err, &te) || errors.Is(err, ErrBuildFailed) {
		t.Fatalf("Build of a hanging configure = %v, want a *TimeoutError", err)
	}
	if te.Commit != c || te.Timeout != b.Timeout || !strings.Contains(err.Error(), "build.timeout") {
		t.Errorf("timeout error %+v: %v", te, err)
	}
	if log, err := os.ReadFile(te.LogPath); err != nil || !strings.Contains(string(log), "configuring") {
		t.Errorf("log %s of the stopped build: %v\n%s", te.LogPath, err, log)
	}
	key, err := b.Key(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.readFailure(key.ID); ok {
		t.Error("a build that timed out was recorded as a failure")
	}
	if procs := processesUnder(filepath.Join(b.stateDir, "worktrees")); len(procs) > 0 {
		// proc kills the process group and waits for it before Run returns.
		t.Errorf("processes still running in the worktree: %v", procs)
	}
}
