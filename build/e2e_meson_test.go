package build

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEndToEndMeson18 builds the real PostgreSQL 18.6 source with meson and
// ninja: the base commit (one full build, shared through the test state
// directory with every other test of 18.6 and every later run), then a
// one-file backend change, which ninja rebuilds without setting up meson
// again. Both servers must initdb, start and answer SELECT version(), and
// the install must have the layout configure builds have (lib/, not
// meson's Debian default lib/<multiarch>).
func TestEndToEndMeson18(t *testing.T) {
	f := newE2EOf(t, 18, Options{Meson: true})
	ctx := context.Background()

	baseInst, err := f.b.Build(ctx, f.base)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("18.6 base: key %s, built in %s", baseInst.Key, baseInst.Duration.Round(1e9))
	if !baseInst.Options.Meson {
		t.Errorf("the base install was not built with meson: %s", baseInst.Options)
	}
	for _, p := range []string{"lib/libpq.so.5", "lib/postgresql/plpgsql.so", "share/postgresql/postgres.bki"} {
		if _, err := os.Stat(filepath.Join(baseInst.Prefix, p)); err != nil {
			t.Errorf("install layout: %v", err)
		}
	}
	checkServer(t, baseInst, "PostgreSQL 18.6")
	// A module that links libpq finds it through the rpath too.
	if out, err := exec.Command("ldd", filepath.Join(baseInst.Prefix, "lib/postgresql/libpqwalreceiver.so")).Output(); err == nil {
		if !strings.Contains(string(out), baseInst.Prefix+"/lib/postgresql/../libpq.so") {
			t.Errorf("libpqwalreceiver does not use the install's libpq:\n%s", out)
		}
	}

	one := f.commit(t, "copyfromparse.c: add a comment", 1, map[string]func(string) (string, error){
		"src/backend/commands/copyfromparse.c": appendLine("/* pgbisect e2e: one-file change on 18 */"),
	})
	f.journal.reset()
	inst, err := f.b.Build(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Commit != one || inst.Prefix == baseInst.Prefix {
		t.Errorf("build of the one-file commit: %+v", inst)
	}
	// Other tests share the worktree; after a small checkout meson must
	// not have been set up again.
	if n := f.journal.checkoutCount(); n < 100 && f.journal.contains(": meson setup (") {
		t.Errorf("a checkout of %d files set meson up again", n)
	} else {
		t.Logf("checkout wrote %d files; rebuilt in %s", n, inst.Duration.Round(1e9))
	}
	checkServer(t, inst, "PostgreSQL 18.6")
}
