// Package pgsrctest holds what other packages' tests need from the
// PostgreSQL source fixture: the shared repository or a clear skip, and the
// pgbisect state directory every end-to-end test shares.
//
// It exists so that package pgsrc, which the demo links into the binary,
// does not import testing: only tests import pgsrctest.
package pgsrctest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// StateDir returns the pgbisect state directory shared by all tests
// (pgsrc.TestRoot()/state). Give it to build.NewBuilder (and anything else
// that takes a state directory) so that every test's build of the fixture's
// base commit is the same cache entry: the first test to need it builds it
// once, the others wait on its lock and then hit the cache.
func StateDir() (string, error) {
	root, err := pgsrc.TestRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "state")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("test state directory: %w", err)
	}
	return dir, nil
}

// Require returns the shared repository and base hash for a test, or ends
// the test: when the tarball is missing it fails under CI=true (CI must run
// scripts/setup-debian.sh first) and skips otherwise.
func Require(t testing.TB) (dir, base string) {
	t.Helper()
	return RequireMajor(t, pgsrc.DefaultMajor)
}

// RequireMajor is Require for the fixture of another major version (13 or
// 18; see pgsrc.TarballOf).
func RequireMajor(t testing.TB, major int) (dir, base string) {
	t.Helper()
	dir, base, err := pgsrc.SharedRepoOf(context.Background(), major)
	if err != nil {
		Unavailable(t, err)
	}
	return dir, base
}

// Unavailable ends a test that cannot run because a prerequisite (source
// tarball, build tools, Debian's PostgreSQL) is missing: a failure under
// CI=true, a skip elsewhere. The message says to run
// scripts/setup-debian.sh.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	citest.Unavailable(t, "%v (run scripts/setup-debian.sh as root to install what the end-to-end tests need)", err)
}

// EndToEnd starts a test that builds and benchmarks PostgreSQL from the
// fixture: it skips under -short, requires the shared repository (see
// Require) and returns the shared state directory (see StateDir).
func EndToEnd(t testing.TB) (state string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and benchmarks PostgreSQL; skipped with -short")
	}
	Require(t)
	state, err := StateDir()
	if err != nil {
		Unavailable(t, err)
	}
	return state
}

// DebianBin returns the bin directory of Debian's PostgreSQL 15, the
// stand-in build of tests that need a server but not a build of their own.
// Without it a test is skipped, except under CI=true, where it fails.
func DebianBin(t testing.TB) string {
	t.Helper()
	dir := "/usr/lib/postgresql/15/bin"
	if _, err := os.Stat(filepath.Join(dir, "pgbench")); err != nil {
		citest.Unavailable(t, "Debian's postgresql-15 is not installed: run scripts/setup-debian.sh")
	}
	return dir
}

// ServerDir returns a state directory the server's user can reach (the
// parent of t.TempDir is 0700), removed when the test ends.
func ServerDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgbisect-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// ReleasesEnv lists the opt-in release builds the tests may make, comma
// separated: "13" (13.16 with configure) and "18-configure" (18.6 with
// configure; 18.6 with meson is always built, in CI too). Each is a full
// build of its own, 6 to 9 minutes on 2 busy cores here, shared through
// StateDir once made.
const ReleasesEnv = "PGBISECT_TEST_RELEASES"

// ReleaseEnabled reports whether ReleasesEnv lists name.
func ReleaseEnabled(name string) bool {
	for _, n := range strings.Split(os.Getenv(ReleasesEnv), ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

// RequireRelease skips a test of an opt-in release build that ReleasesEnv
// does not list, saying how to run it. It is a deliberate opt-in, not a
// missing prerequisite: it skips under CI=true too, where .ci/run lists
// the releases CI builds.
func RequireRelease(t testing.TB, name string) {
	t.Helper()
	if !ReleaseEnabled(name) {
		t.Skipf("PostgreSQL %s is an opt-in build (a full build of its own, 6 to 9 minutes on 2 busy cores here): run with %s=%s (docs/build.md)", name, ReleasesEnv, name)
	}
}
