// Package pghistory gives tests the real upstream PostgreSQL history that
// every pgbisect machine holds beside its checkout (../shared/pg-history:
// shallow bare repositories of master with the upstream hashes, see its
// README): the judge of any claim about finding culprits.
//
// The tarballs are read-only (shared/ is read-only in CI): a repository is
// extracted once into the test state directory (PGBISECT_TEST_STATE) under
// a file lock and reused by every later test and test run. pgbisect opens
// a repository given by path in place; what it writes there is only refs
// under refs/pgbisect/ (the revert checks' commits), which no test reads
// as history.
//
// Only tests import it.
package pghistory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// Env names the directory holding the history tarballs when it is not
// ../shared/pg-history beside the checkout (or beside one of its parents).
const Env = "PGBISECT_PG_HISTORY"

// PG16 is the whole PG16 development cycle on master (2,539 commits,
// d31d30973a "Stamp HEAD as 16devel." to 5bcc7e6dc8 "Stamp HEAD as
// 17devel.").
const PG16 = "pg16-cycle"

// Dir finds the directory of the history tarballs: $PGBISECT_PG_HISTORY,
// else shared/pg-history in the working directory's parent or any parent
// above it (a checkout's tests run in its package directories).
func Dir() (string, error) {
	if d := os.Getenv(Env); d != "" {
		if _, err := os.Stat(filepath.Join(d, PG16+".tar")); err != nil {
			return "", fmt.Errorf("%s=%s holds no %s.tar: %w", Env, d, PG16, err)
		}
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		cand := filepath.Join(d, "shared", "pg-history")
		if _, err := os.Stat(filepath.Join(cand, PG16+".tar")); err == nil {
			return cand, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("no shared/pg-history beside the checkout or above %s (set %s to the directory holding %s.tar)", wd, Env, PG16)
}

// Repo returns the bare repository name (PG16) extracted from its tarball,
// or ends t: it fails under CI=true when the history is missing and skips
// elsewhere (citest).
func Repo(t testing.TB, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("bisects real PostgreSQL history; skipped with -short")
	}
	src, err := Dir()
	if err != nil {
		citest.Unavailable(t, "%v", err)
	}
	root, err := pgsrc.TestRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := extract(context.Background(), filepath.Join(src, name+".tar"), filepath.Join(root, "pg-history"), name+".git")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// extract unpacks tarball into parent (which then holds want) once: a
// second caller, of this or another test process, waits on the lock and
// finds it done.
func extract(ctx context.Context, tarball, parent, want string) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	dir := filepath.Join(parent, want)
	done := dir + ".done"
	lock := flock.New(dir + ".lock")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if _, err := lock.TryLockContext(ctx, 200*time.Millisecond); err != nil {
		return "", fmt.Errorf("waiting for the lock on %s: %w", dir, err)
	}
	defer lock.Unlock() //nolint:errcheck // released on exit anyway
	if _, err := os.Stat(done); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(parent, ".extract-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.CommandContext(ctx, "tar", "-xf", tarball, "-C", tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("extracting %s: %v: %s", tarball, err, out)
	}
	if _, err := os.Stat(filepath.Join(tmp, want, "HEAD")); err != nil {
		return "", fmt.Errorf("%s holds no bare repository %s: %w", tarball, want, err)
	}
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.Rename(filepath.Join(tmp, want), dir); err != nil {
		return "", err
	}
	// The tests' servers and builds run as another user, who reads it.
	if err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		mode := fi.Mode().Perm() | 0o444
		if fi.IsDir() {
			mode |= 0o111
		}
		return os.Chmod(p, mode)
	}); err != nil {
		return "", err
	}
	return dir, os.WriteFile(done, nil, 0o644)
}
