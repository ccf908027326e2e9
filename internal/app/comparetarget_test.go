package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/testkit/gittest"
)

// TestQueuedCompareNeverMeasuresBinDir: a queued comparison's revision is
// never looked up on the disk, even when a directory of that name, relative
// to the daemon's working directory, holds a pg_ctl: it is built (here it
// resolves to no commit) or refused. The local command line's still
// measures an installation's bin directory.
func TestQueuedCompareNeverMeasuresBinDir(t *testing.T) {
	repo, _, _, _, _ := gittest.Repo(t)
	a, err := Open(context.Background(), Options{StateDir: t.TempDir(), Repo: repo, Branch: "master"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	for _, dir := range []string{"tmp/evil/bin", "tmp/evil"} {
		if err := os.MkdirAll(filepath.Join(cwd, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cwd, dir, "pg_ctl"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(cwd)
	sink := func(Event) {}
	for _, rev := range []string{"tmp/evil/bin", "tmp/evil"} {
		tg, err := a.target(context.Background(), rev, false, sink)
		if err == nil || strings.HasPrefix(tg.BinDir, cwd) {
			t.Errorf("queued %q: measured %+v (%v)", rev, tg, err)
		}
		tg, err = a.target(context.Background(), rev, true, sink)
		if err != nil || tg.BinDir != filepath.Join(cwd, rev) {
			t.Errorf("local %q: %+v, %v; want the installation at %s", rev, tg, err, filepath.Join(cwd, rev))
		}
	}
}
