// Package build builds PostgreSQL at any commit and caches the installs.
//
// All repository work goes through go-git: opening or cloning, fetching,
// resolving revisions, walking ranges and diffing trees. Builds happen in one
// persistent worktree per set of build options; moving that worktree to
// another commit rewrites only the files whose contents differ, so make's
// dependency tracking (configure --enable-depend) rebuilds only what a commit
// really changed. That choice is what makes a bisection step cost seconds
// instead of a full five-minute build.
package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/pgbisect/pgbisect/internal/base/redact"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo is a PostgreSQL git repository opened with go-git.
type Repo struct {
	dir    string
	remote string // URL it was cloned from, "" for a directory given by the user
	repo   *git.Repository
}

// Commit describes one commit.
type Commit struct {
	Hash        string
	Subject     string // first line of the message
	Author      string
	AuthorEmail string
	Date        time.Time // author date, as git log shows it
	CommitDate  time.Time // committer date, used to order walks
	Parents     []string
}

// Short returns the first 10 hex digits of the hash, as in "9f8377f7a2".
func (c Commit) Short() string { return Short(c.Hash) }

// Short abbreviates a hash to 10 hex digits.
func Short(hash string) string {
	if len(hash) > 10 {
		return hash[:10]
	}
	return hash
}

// IsURL reports whether source names a remote repository rather than a
// local directory.
func IsURL(source string) bool {
	if strings.Contains(source, "://") {
		return true
	}
	// scp-like syntax: git@host:path
	if i := strings.Index(source, ":"); i > 0 && !strings.Contains(source[:i], "/") && strings.Contains(source[:i], "@") {
		return true
	}
	return false
}

// Open opens the repository at source. A directory is opened in place (a
// bare repository or a work tree). A URL is cloned with go-git into
// stateDir/repos/<name> the first time and opened from there afterwards;
// call Fetch to bring it up to date. Clone progress goes to progress (which
// may be nil).
func Open(ctx context.Context, source, stateDir string, progress io.Writer) (*Repo, error) {
	if source == "" {
		return nil, errors.New("no repository given: pass --repo DIR_OR_URL or set repo in the config file")
	}
	if !IsURL(source) {
		dir, err := filepath.Abs(source)
		if err != nil {
			return nil, fmt.Errorf("opening repository %s: %w", source, err)
		}
		repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
		if err != nil {
			return nil, fmt.Errorf("opening repository %s: %w (give a git repository directory or a URL to clone)", source, err)
		}
		return &Repo{dir: dir, repo: repo}, nil
	}
	if stateDir == "" {
		return nil, fmt.Errorf("cloning %s: no state directory to clone into", source)
	}
	// Credentials in the URL (https://user:token@...) never reach a message.
	shown := redact.String(source)
	dir := filepath.Join(stateDir, "repos", cloneName(source))
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		repo, err := git.PlainOpen(dir)
		if err != nil {
			return nil, fmt.Errorf("opening the clone of %s in %s: %w (remove that directory to clone again)", shown, dir, err)
		}
		return &Repo{dir: dir, remote: source, repo: repo}, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("cloning %s: %s", shown, redact.String(err.Error()))
	}
	// Clone beside the final place and rename, so an interrupted clone
	// never looks like a finished one.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".clone-")
	if err != nil {
		return nil, fmt.Errorf("cloning %s: %s", shown, redact.String(err.Error()))
	}
	defer os.RemoveAll(tmp)
	if progress != nil {
		fmt.Fprintf(progress, "cloning %s into %s (once; later runs fetch)\n", shown, dir)
	}
	_, err = git.PlainCloneContext(ctx, tmp, true, &git.CloneOptions{
		URL:      source,
		Progress: progress,
		Tags:     git.AllTags,
	})
	if err != nil {
		return nil, fmt.Errorf("cloning %s: %s", shown, redact.String(err.Error()))
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("cloning %s: %s", shown, redact.String(err.Error()))
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the clone of %s: %w", shown, err)
	}
	return &Repo{dir: dir, remote: source, repo: repo}, nil
}

// cloneName is a readable, collision-free directory name for a URL:
// "postgresql-1a2b3c4d".
func cloneName(source string) string {
	base := source
	if u, err := url.Parse(source); err == nil && u.Path != "" {
		base = u.Path
	} else if i := strings.LastIndex(source, ":"); i >= 0 {
		base = source[i+1:]
	}
	base = strings.TrimSuffix(strings.TrimRight(base, "/"), ".git")
	base = filepath.Base(base)
	if base == "." || base == "/" || base == "" {
		base = "repo"
	}
	sum := sha256.Sum256([]byte(source))
	return base + "-" + hex.EncodeToString(sum[:4])
}

// Dir returns the repository's directory (for a clone, the bare repository
// under the state directory).
func (r *Repo) Dir() string { return r.dir }

// Remote returns the URL the repository was cloned from, without any
// credentials it holds (for messages and reports), or "" when it was
// opened from a directory.
func (r *Repo) Remote() string { return redact.String(r.remote) }

// Git returns the underlying go-git repository, for callers (tests, the
// fixture) that need plumbing this package does not wrap.
func (r *Repo) Git() *git.Repository { return r.repo }

// Fetch updates branch (and tags) from the remote "origin". In a clone made
// by Open, the local branch refs/heads/<branch> is moved too, so that
// Resolve(branch) sees the fetched commit. In a directory given by the user
// only refs/remotes/origin/<branch> moves: resolve "origin/<branch>" there.
// A directory without an origin remote has nothing to fetch; that is not an
// error.
func (r *Repo) Fetch(ctx context.Context, branch string) error {
	if _, err := r.repo.Remote("origin"); errors.Is(err, git.ErrRemoteNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("fetching %s: %w", branch, err)
	}
	specs := []gitconfig.RefSpec{gitconfig.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/origin/%s", branch, branch))}
	if r.remote != "" {
		specs = append(specs, gitconfig.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/heads/%s", branch, branch)))
	}
	err := r.repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: specs, Tags: git.AllTags, Force: true})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("fetching %s from origin: %w", branch, err)
	}
	return nil
}

// Commit returns the commit with the given full hash.
func (r *Repo) Commit(hash string) (Commit, error) {
	if !plumbing.IsHash(hash) {
		return Commit{}, fmt.Errorf("%q is not a full commit hash: use Resolve for short hashes and names", hash)
	}
	c, err := r.repo.CommitObject(plumbing.NewHash(hash))
	if err != nil {
		return Commit{}, fmt.Errorf("commit %s: %w", Short(hash), err)
	}
	return toCommit(c, r.shallowCommits()), nil
}

// shallowCommits returns the boundary commits of a shallow clone: their
// parents are not in the repository (pg-history's windows start at one).
// It is read each time, as a fetch may move the boundary; a repository
// that cannot say is taken as complete.
func (r *Repo) shallowCommits() map[plumbing.Hash]bool {
	hs, err := r.repo.Storer.Shallow()
	if err != nil || len(hs) == 0 {
		return nil
	}
	m := make(map[plumbing.Hash]bool, len(hs))
	for _, h := range hs {
		m[h] = true
	}
	return m
}

// toCommit describes c. A shallow boundary commit is described with no
// parents, as git log shows it: it is built in full, and it is never a
// culprit to verify against a parent nobody has.
func toCommit(c *object.Commit, shallow map[plumbing.Hash]bool) Commit {
	subject, _, _ := strings.Cut(c.Message, "\n")
	var parents []string
	if !shallow[c.Hash] {
		parents = make([]string, len(c.ParentHashes))
		for i, p := range c.ParentHashes {
			parents[i] = p.String()
		}
	}
	return Commit{
		Hash:        c.Hash.String(),
		Subject:     strings.TrimSpace(subject),
		Author:      c.Author.Name,
		AuthorEmail: c.Author.Email,
		Date:        c.Author.When,
		CommitDate:  c.Committer.When,
		Parents:     parents,
	}
}

// IsAncestor reports whether commit a is an ancestor of commit b (a commit
// is its own ancestor, as in git merge-base --is-ancestor). Both are full
// hashes or anything Resolve accepts.
func (r *Repo) IsAncestor(a, b string) (bool, error) {
	ca, err := r.Resolve(a)
	if err != nil {
		return false, err
	}
	cb, err := r.Resolve(b)
	if err != nil {
		return false, err
	}
	if ca.Hash == cb.Hash {
		return true, nil
	}
	// a is an ancestor of b exactly when walking a's history with b's
	// marked uninteresting ends with a itself uninteresting. The walk reads
	// only the commits between the two, not all of history.
	w := newWalker(r.repo, r.shallowCommits())
	ha := plumbing.NewHash(ca.Hash)
	err = w.walk([]plumbing.Hash{ha}, []plumbing.Hash{plumbing.NewHash(cb.Hash)}, false,
		func(*object.Commit, bool) (bool, error) { return true, nil })
	if err != nil {
		return false, fmt.Errorf("is %s an ancestor of %s: %w", ca.Short(), cb.Short(), err)
	}
	return w.flags[ha]&flagUninteresting != 0, nil
}

// MergeBase returns the best common ancestor of a and b, as git merge-base
// does; of several, the one committed last. Both are full hashes or
// anything Resolve accepts.
func (r *Repo) MergeBase(a, b string) (Commit, error) {
	ca, err := r.resolve(a)
	if err != nil {
		return Commit{}, err
	}
	cb, err := r.resolve(b)
	if err != nil {
		return Commit{}, err
	}
	bases, err := ca.MergeBase(cb)
	if err != nil {
		return Commit{}, fmt.Errorf("merge base of %s and %s: %w", Short(ca.Hash.String()), Short(cb.Hash.String()), err)
	}
	if len(bases) == 0 {
		return Commit{}, fmt.Errorf("%s and %s have no common ancestor", Short(ca.Hash.String()), Short(cb.Hash.String()))
	}
	best := bases[0]
	for _, c := range bases[1:] {
		if c.Committer.When.After(best.Committer.When) {
			best = c
		}
	}
	return toCommit(best, r.shallowCommits()), nil
}

// ChangedPaths returns the sorted paths a commit adds, modifies or deletes
// compared with its first parent (every path, for a root commit).
func (r *Repo) ChangedPaths(hash string) ([]string, error) {
	c, err := r.Resolve(hash)
	if err != nil {
		return nil, err
	}
	return r.changedPaths(plumbing.NewHash(c.Hash))
}

func (r *Repo) changedPaths(h plumbing.Hash) ([]string, error) {
	c, err := r.repo.CommitObject(h)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", Short(h.String()), err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", Short(h.String()), err)
	}
	var parentTree *object.Tree
	if c.NumParents() > 0 && !r.shallowCommits()[h] {
		p, err := c.Parent(0)
		if err != nil {
			return nil, fmt.Errorf("parent of %s: %w", Short(h.String()), err)
		}
		if parentTree, err = p.Tree(); err != nil {
			return nil, fmt.Errorf("tree of %s: %w", Short(p.Hash.String()), err)
		}
	}
	changes, err := diffTrees(parentTree, tree)
	if err != nil {
		return nil, fmt.Errorf("diffing %s against its parent: %w", Short(h.String()), err)
	}
	return changes.paths(), nil
}
