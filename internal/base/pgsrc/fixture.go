package pgsrc

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/gofrs/flock"
)

// The fixture repository below is shared by the tests and by "pgbisect demo
// --shared", so it is part of the binary; what only tests need (Require,
// the shared state directory) is in package pgsrctest, which keeps testing
// out of the binary.

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

// SharedRepo returns the PostgreSQL 15 fixture repository (SharedRepoOf
// DefaultMajor).
func SharedRepo(ctx context.Context) (dir, base string, err error) {
	return SharedRepoOf(ctx, DefaultMajor)
}

// SharedRepoOf returns the fixture repository of a major version (imported
// once from TarballOf(major) into TestRoot()/fixture, under a file lock,
// and reused by every later test and test run) and the hash of its one
// commit. Treat it as read-only: to add commits, make your own copy with
// NewRepoOf.
func SharedRepoOf(ctx context.Context, major int) (dir, base string, err error) {
	tarball, err := TarballOf(major)
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

// NewRepo creates a copy of the PostgreSQL 15 fixture (NewRepoOf
// DefaultMajor).
func NewRepo(ctx context.Context, dir string) (string, error) {
	return NewRepoOf(ctx, dir, DefaultMajor)
}

// NewRepoOf creates a bare repository at dir holding the base commit of
// the fixture of a major version on branch master (objects are hard-linked
// from SharedRepoOf, so it takes well under a second) and returns the base
// hash. Add commits with Commit; they are this repository's alone.
func NewRepoOf(ctx context.Context, dir string, major int) (string, error) {
	shared, base, err := SharedRepoOf(ctx, major)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("new fixture repository: %w", err)
	}
	if err := linkObjects(shared, dir); err != nil {
		return "", err
	}
	if err := writeRepoFiles(dir, map[string]string{"refs/heads/" + Branch: base + "\n"}); err != nil {
		return "", err
	}
	return base, nil
}

// NewReleasesRepo creates a bare repository at dir holding the base commit
// of the fixture of each major version, tagged as upstream tags its
// releases (REL_13_16, REL_15_18, REL_18_6), with branch master at the
// last, and returns the tags in the order given. The commits are the
// fixtures' own, so their builds are the ones every other test shares:
// "pgbisect compare --repo dir REL_13_16 REL_15_18" compares two releases
// the way it would on a clone of the upstream repository. They share no
// history, so it is for comparisons, not bisections.
func NewReleasesRepo(ctx context.Context, dir string, majors ...int) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("releases repository: %w", err)
	}
	refs := map[string]string{}
	var tags []string
	for _, major := range majors {
		shared, base, err := SharedRepoOf(ctx, major)
		if err != nil {
			return nil, err
		}
		tarball, _ := TarballOf(major)
		_, version, _ := strings.Cut(strings.SplitN(filepath.Base(tarball), ".orig.tar", 2)[0], "_")
		tag := "REL_" + strings.ReplaceAll(version, ".", "_")
		if err := linkObjects(shared, dir); err != nil {
			return nil, err
		}
		refs["refs/tags/"+tag] = base + "\n"
		refs["refs/heads/"+Branch] = base + "\n"
		tags = append(tags, tag)
	}
	if err := writeRepoFiles(dir, refs); err != nil {
		return nil, err
	}
	return tags, nil
}

// NewReleasesHistory creates a bare repository at dir whose branch master
// is a history of the releases of the given major versions, in order: the
// first commit is the first release's fixture commit (so its build is the
// shared one), and each later commit has the next release's whole tree,
// its parent the one before, one day later. Each is tagged as upstream tags
// the release (REL_13_16, ...). It returns the commits and tags in order.
// Unlike NewReleasesRepo's, the later commits are not the fixtures', so
// each of them is a build of its own; "pgbisect bisect" over the history
// answers which release changed a scenario.
func NewReleasesHistory(ctx context.Context, dir string, majors ...int) (commits, tags []string, err error) {
	if len(majors) == 0 {
		return nil, nil, fmt.Errorf("releases history: no releases")
	}
	if tags, err = NewReleasesRepo(ctx, dir, majors...); err != nil {
		return nil, nil, err
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("releases history: %w", err)
	}
	var parent plumbing.Hash
	for i, tag := range tags {
		ref, err := repo.Reference(plumbing.NewTagReferenceName(tag), true)
		if err != nil {
			return nil, nil, fmt.Errorf("releases history: %s: %w", tag, err)
		}
		hash := ref.Hash()
		if i > 0 {
			c, err := repo.CommitObject(hash)
			if err != nil {
				return nil, nil, fmt.Errorf("releases history: %s: %w", tag, err)
			}
			msg := fmt.Sprintf("Release %s (the whole tree of %s)\n", strings.ReplaceAll(strings.TrimPrefix(tag, "REL_"), "_", "."), tag)
			if hash, err = storeCommit(repo.Storer, c.TreeHash, []plumbing.Hash{parent}, msg, BaseDate.AddDate(0, 0, i)); err != nil {
				return nil, nil, fmt.Errorf("releases history: %w", err)
			}
			if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewTagReferenceName(tag), hash)); err != nil {
				return nil, nil, fmt.Errorf("releases history: %w", err)
			}
		}
		commits = append(commits, hash.String())
		parent = hash
	}
	if err := setBranch(repo, parent); err != nil {
		return nil, nil, err
	}
	return commits, tags, nil
}

// linkObjects hard-links (or copies) the object store of the repository
// shared into the one at dir.
func linkObjects(shared, dir string) error {
	src := filepath.Join(shared, "objects")
	dst := filepath.Join(dir, "objects")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
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
		return fmt.Errorf("new fixture repository: copying objects: %w", err)
	}
	return nil
}

// writeRepoFiles writes a bare repository's HEAD (branch Branch), config
// and the given refs (name to content).
func writeRepoFiles(dir string, refs map[string]string) error {
	for _, d := range []string{"refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"HEAD":   "ref: refs/heads/" + Branch + "\n",
		"config": "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
	}
	for name, content := range refs {
		files[name] = content
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("new fixture repository: %w", err)
		}
	}
	return nil
}

func writeFileAtomic(name string, data []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
