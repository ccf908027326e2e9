package build

import (
	"context"
	"testing"

	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
)

// TestEndToEndConfigure13 builds the real PostgreSQL 13.16 source with
// configure (13 has no meson.build): one full build, shared through the
// test state directory with every other test of 13.16 (the shipped
// scenarios on each release, the comparison across releases) and every
// later run, in a worktree of its own release, so the 15 builds' worktree
// stays where it is. The server must initdb, start and answer SELECT
// version(). Opt-in: PGBISECT_TEST_RELEASES=13.
func TestEndToEndConfigure13(t *testing.T) {
	pgsrctest.RequireRelease(t, "13")
	f := newE2EOf(t, 13, Options{})
	inst, err := f.b.Build(context.Background(), f.base)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("13.16 base: key %s, built in %s", inst.Key, inst.Duration.Round(1e9))
	if inst.Options.Meson || inst.Options.CompatCFLAGS != "" {
		t.Errorf("13.16 built with %s, want plain configure", inst.Options)
	}
	checkServer(t, inst, "PostgreSQL 13.16")
}

// TestEndToEndConfigure18 builds PostgreSQL 18.6, which has both build
// systems, with configure (TestEndToEndMeson18 builds it with meson): both
// must give a working server. Opt-in: PGBISECT_TEST_RELEASES=18-configure.
func TestEndToEndConfigure18(t *testing.T) {
	pgsrctest.RequireRelease(t, "18-configure")
	f := newE2EOf(t, 18, Options{})
	inst, err := f.b.Build(context.Background(), f.base)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("18.6 base (configure): key %s, built in %s", inst.Key, inst.Duration.Round(1e9))
	if inst.Options.Meson {
		t.Errorf("18.6 built with %s, want configure", inst.Options)
	}
	checkServer(t, inst, "PostgreSQL 18.6")
}
