package pgsrc

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gofrs/flock"
)

// DefaultTestState is the directory shared by the tests of every package
// (and by successive test runs) when PGBISECT_TEST_STATE is not set. It holds
// the imported fixture repository and a pgbisect state directory whose build
// cache and worktrees all end-to-end tests share.
const DefaultTestState = "/var/cache/pgbisect/teststate"

// TestRoot returns $PGBISECT_TEST_STATE or DefaultTestState, created and
// traversable by the unprivileged server user.
func TestRoot() (string, error) {
	root := os.Getenv("PGBISECT_TEST_STATE")
	if root == "" {
		root = DefaultTestState
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("test state directory: %w (set PGBISECT_TEST_STATE to a writable directory)", err)
	}
	return root, nil
}

// TestStateDir returns the pgbisect state directory shared by all tests
// (TestRoot()/state). Give it to build.NewBuilder (and anything else that
// takes a state directory) so that every test's build of the fixture's base
// commit is the same cache entry: the first test to need it builds it once,
// the others wait on its lock and then hit the cache.
func TestStateDir() (string, error) {
	root, err := TestRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "state")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("test state directory: %w", err)
	}
	return dir, nil
}

// SharedRepo returns the fixture repository (imported once from Tarball
// into TestRoot()/fixture, under a file lock, and reused by every later
// test and test run) and the hash of its one commit. Treat it as read-only:
// to add commits, make your own copy with NewRepo.
func SharedRepo(ctx context.Context) (dir, base string, err error) {
	tarball, err := Tarball()
	if err != nil {
		return "", "", err
	}
	root, err := TestRoot()
	if err != nil {
		return "", "", err
	}
	fixtures := filepath.Join(root, "fixture")
	if err := os.MkdirAll(fixtures, 0o755); err != nil {
		return "", "", fmt.Errorf("fixture directory: %w", err)
	}
	name := strings.SplitN(filepath.Base(tarball), ".orig.tar", 2)[0]
	dir = filepath.Join(fixtures, name+".git")
	baseFile := dir + ".base"
	if b, err := os.ReadFile(baseFile); err == nil {
		return dir, strings.TrimSpace(string(b)), nil
	}
	lock := flock.New(dir + ".lock")
	if ok, err := lock.TryLockContext(ctx, lockPoll); err != nil || !ok {
		return "", "", fmt.Errorf("locking the fixture repository: %w", err)
	}
	defer lock.Unlock()
	if b, err := os.ReadFile(baseFile); err == nil {
		return dir, strings.TrimSpace(string(b)), nil // imported while we waited
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", "", err
	}
	base, err = Import(ctx, tarball, tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return "", "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", "", fmt.Errorf("fixture repository: %w", err)
	}
	if err := writeFileAtomic(baseFile, []byte(base+"\n")); err != nil {
		return "", "", err
	}
	return dir, base, nil
}

// NewRepo creates a bare repository at dir holding the fixture's base
// commit on branch master (objects are hard-linked from SharedRepo, so it
// takes well under a second) and returns the base hash. Add commits with
// Commit; they are this repository's alone.
func NewRepo(ctx context.Context, dir string) (string, error) {
	shared, base, err := SharedRepo(ctx)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("new fixture repository: %w", err)
	}
	src := filepath.Join(shared, "objects")
	dst := filepath.Join(dir, "objects")
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if err := os.Link(p, target); err == nil || os.IsExist(err) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o444)
	})
	if err != nil {
		return "", fmt.Errorf("new fixture repository: copying objects: %w", err)
	}
	for _, d := range []string{"refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	files := map[string]string{
		"HEAD":                 "ref: refs/heads/" + Branch + "\n",
		"config":               "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
		"refs/heads/" + Branch: base + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return "", fmt.Errorf("new fixture repository: %w", err)
		}
	}
	return base, nil
}

// Require returns the shared repository and base hash for a test, or ends
// the test: when the tarball is missing it fails under CI=true (CI must run
// scripts/setup-debian.sh first) and skips otherwise.
func Require(t testing.TB) (dir, base string) {
	t.Helper()
	dir, base, err := SharedRepo(context.Background())
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
	msg := fmt.Sprintf("%v (run scripts/setup-debian.sh as root to install what the end-to-end tests need)", err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func writeFileAtomic(name string, data []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
