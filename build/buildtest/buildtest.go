// Package buildtest gives other packages' tests real PostgreSQL releases:
// the install of the base commit of a release's fixture (pgsrc), built
// once and shared through the test state directory (pgsrctest.StateDir)
// with every other test of that release and every later test run.
//
// Releases and how they are built, the way the build package's own
// end-to-end tests build them, so that all share one cache entry:
//
//   - 15 (15.18, the default fixture): configure; always available.
//   - 18 (18.6): meson and ninja, TestEndToEndMeson18's build; always
//     available (CI builds it).
//   - 13 (13.16): configure; a full build of its own (6 m 20 s on 2 busy
//     cores here), made only when PGBISECT_TEST_RELEASES lists 13
//     (pgsrctest.RequireRelease).
//
// Only tests import it (the binary links no test-support package).
package buildtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// Release is a real PostgreSQL release the tests can build.
type Release struct {
	Name    string        // "13", "15", "18"
	Major   int           // its fixture's major version
	Options build.Options // how it is built
	OptIn   bool          // built only when pgsrctest.ReleasesEnv lists Name
}

// Releases are the releases of the version tests, oldest first; 18 is the
// meson build.
var Releases = []Release{
	{Name: "13", Major: 13, OptIn: true},
	{Name: "15", Major: 15},
	{Name: "18", Major: 18, Options: build.Options{Meson: true}},
}

// Install returns r's install, building it if no earlier test or run has
// (as postgres when the tests run as root, as the application builds).
// An opt-in release that is not enabled skips the test, saying how to run
// it (pgsrctest.RequireRelease); a missing tarball, tool or user ends it as pgsrctest.Unavailable
// does (a failure under CI=true).
func Install(t testing.TB, r Release) *build.Install {
	t.Helper()
	if testing.Short() {
		t.Skip("builds PostgreSQL; skipped with -short")
	}
	if r.OptIn {
		pgsrctest.RequireRelease(t, r.Name)
	}
	inst, err := build1(context.Background(), r, t)
	if err != nil {
		var mt *build.MissingToolsError
		if errors.As(err, &mt) || errors.Is(err, errUnavailable) {
			pgsrctest.Unavailable(t, err)
		}
		t.Fatalf("building PostgreSQL %s: %v", r.Name, err)
	}
	return inst
}

var errUnavailable = errors.New("unavailable")

func build1(ctx context.Context, r Release, t testing.TB) (*build.Install, error) {
	state, err := pgsrctest.StateDir()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	shared, base, err := pgsrc.SharedRepoOf(ctx, r.Major)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	repo, err := build.Open(ctx, shared, state, nil)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b := build.NewBuilder(repo, state, r.Options, testLog{t}, log)
	if proc.IsRoot() {
		u, err := proc.LookupUser(proc.BenchUser)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errUnavailable, err)
		}
		b.BuildAs = u
	}
	b.Timeout = time.Hour
	inst, err := b.Build(ctx, base)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(inst.BinDir(), "postgres")); err != nil {
		return nil, fmt.Errorf("install of PostgreSQL %s: %w", r.Name, err)
	}
	return inst, nil
}

// testLog passes build progress to the test's log.
type testLog struct{ t testing.TB }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
