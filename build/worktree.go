package build

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// worktree is the persistent build directory of one set of options:
//
//	dir/src          the checked-out source, written by pgbisect only
//	dir/build        configure's and make's build tree (a VPATH build)
//	dir/meson-build  meson's build tree
//	dir/manifest     "mode hash path" of every file written from git
//	dir/pending      paths being rewritten; present only mid-checkout
//	dir/state.json   what was configured and built there
//
// The source is never built in place: configure and make run in dir/build
// as the build user (Builder.BuildAs), who may not write dir/src. See
// owner.go for who owns what.
//
// Files are written from git objects, never by a full checkout, so that a
// switch between commits touches only the files that differ and make
// rebuilds only what depends on them.
type worktree struct {
	dir string
}

func (w *worktree) src() string          { return filepath.Join(w.dir, "src") }
func (w *worktree) build() string        { return filepath.Join(w.dir, "build") }
func (w *worktree) mesonBuild() string   { return filepath.Join(w.dir, "meson-build") }
func (w *worktree) manifestPath() string { return filepath.Join(w.dir, "manifest") }
func (w *worktree) pendingPath() string  { return filepath.Join(w.dir, "pending") }
func (w *worktree) statePath() string    { return filepath.Join(w.dir, "state.json") }

// worktreeState records what the worktree holds.
type worktreeState struct {
	Commit     string // commit whose files are in src
	Configured string // configure inputs+options hash configure last succeeded with; "" = not configured
	Built      string // commit whose build last succeeded
	// InstallStarted is when Built's install began: build products
	// modified since have changed since Built's install (incremental.go).
	InstallStarted time.Time `json:",omitzero"`
	// Layout is layoutVPATH for worktrees built out of tree; "" for those
	// an earlier pgbisect configured and built in src.
	Layout string `json:",omitempty"`
}

// layoutVPATH marks a worktree whose source is built out of tree, written
// with one modification time per checkout ("vpath" worktrees were not, and
// are written again).
const layoutVPATH = "vpath2"

func (w *worktree) state() worktreeState {
	var s worktreeState
	data, err := os.ReadFile(w.statePath())
	if err == nil {
		_ = json.Unmarshal(data, &s)
	}
	return s
}

func (w *worktree) saveState(s worktreeState) error {
	data, _ := json.MarshalIndent(s, "", "  ")
	return writeFileAtomic(w.statePath(), data, 0o644)
}

// reset removes everything so the next checkout starts afresh.
func (w *worktree) reset() error {
	if err := w.resetSource(); err != nil {
		return err
	}
	if err := os.RemoveAll(w.build()); err != nil {
		return err
	}
	return os.RemoveAll(w.mesonBuild())
}

// resetSource removes the source and what records it, keeping the build
// trees, so the next checkout writes every file afresh.
func (w *worktree) resetSource() error {
	for _, p := range []string{w.statePath(), w.manifestPath(), w.pendingPath()} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return os.RemoveAll(w.src())
}

// migrate brings a worktree of an earlier pgbisect to the out-of-tree
// layout. Such a worktree was configured and built in src as root: its
// objects, generated files and config.status are in src, where a VPATH
// make would take them for up to date and PostgreSQL's configure refuses
// to run ("source directory already configured"). "make distclean" would
// run the commit's own Makefile as root, so the source is removed
// instead and the next checkout writes it afresh (a few seconds); an old
// meson-build, which root owned, goes too. The caller holds the worktree
// lock. It reports whether it changed anything.
func (w *worktree) migrate() (bool, error) {
	st := w.state()
	inTree := exists(filepath.Join(w.src(), "config.status")) || exists(filepath.Join(w.src(), "GNUmakefile"))
	if st.Layout == layoutVPATH && !inTree {
		return false, nil
	}
	if !inTree && !exists(w.src()) && !exists(w.mesonBuild()) {
		return false, nil // nothing there yet
	}
	if err := w.resetSource(); err != nil {
		return false, err
	}
	if st.Layout != layoutVPATH {
		if err := os.RemoveAll(w.mesonBuild()); err != nil {
			return false, err
		}
	}
	return true, w.saveState(worktreeState{Layout: layoutVPATH})
}

// rewriteAll makes the next checkout check every tracked file against git
// and write again those whose content differs (regenerated or edited in
// place), by listing them all as pending.
func (w *worktree) rewriteAll() error {
	m, err := readManifest(w.manifestPath())
	if err != nil {
		return err
	}
	paths := make([]string, 0, len(m))
	for p := range m {
		paths = append(paths, p)
	}
	return writeFileAtomic(w.pendingPath(), []byte(strings.Join(paths, "\n")+"\n"), 0o644)
}

type fileEntry struct {
	mode filemode.FileMode
	hash plumbing.Hash
}

// checkout makes src hold commit's files, writing only files that differ
// from the manifest (and any a previous, interrupted checkout was
// rewriting). It returns how many files it wrote or removed. A worktree
// without a manifest is unknown and is recreated.
func (w *worktree) checkout(ctx context.Context, repo *Repo, commit string) (int, error) {
	c, err := repo.repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return 0, fmt.Errorf("checkout %s: %w", Short(commit), err)
	}
	tree, err := c.Tree()
	if err != nil {
		return 0, fmt.Errorf("checkout %s: %w", Short(commit), err)
	}
	target, err := treeFiles(tree)
	if err != nil {
		return 0, fmt.Errorf("checkout %s: %w", Short(commit), err)
	}
	if err := checkCheckout(repo, commit, target); err != nil {
		return 0, err
	}
	old, err := readManifest(w.manifestPath())
	if err != nil {
		// Unknown contents: start over rather than guess.
		if err := w.reset(); err != nil {
			return 0, fmt.Errorf("recreating worktree %s: %w", w.dir, err)
		}
		old = map[string]fileEntry{}
	}
	if err := os.MkdirAll(w.src(), 0o755); err != nil {
		return 0, err
	}
	// Every write, removal and read below goes through src's os.Root: a
	// path checkCheckout missed, or a symbolic link left on disk, still
	// cannot make root write outside the source.
	root, err := os.OpenRoot(w.src())
	if err != nil {
		return 0, fmt.Errorf("checkout %s: %w", Short(commit), err)
	}
	defer root.Close()
	force, _ := readLines(w.pendingPath())

	writes, deletes := diffEntries(old, target)
	for _, p := range force {
		if pathProblem(p) != "" {
			continue // not a path any checkout wrote
		}
		e, ok := target[p]
		switch {
		case !ok:
			deletes = append(deletes, p)
		case !onDisk(root, p, e):
			// Only files that really differ: rewriting an intact
			// configure would make make re-run it (minutes).
			writes = append(writes, p)
		}
	}
	writes, deletes = dedup(writes), dedup(deletes)
	if len(writes)+len(deletes) == 0 {
		if err := os.Remove(w.pendingPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
		return 0, nil
	}
	// Remember what is being rewritten, so an interruption is repaired by
	// the next checkout (old manifest plus these paths) instead of leaving
	// stale or half-written files.
	if err := writeFileAtomic(w.pendingPath(), []byte(strings.Join(append(append([]string{}, writes...), deletes...), "\n")+"\n"), 0o644); err != nil {
		return 0, err
	}
	for _, p := range deletes {
		rel := filepath.FromSlash(p)
		if err := root.Remove(rel); err != nil && !errors.Is(err, os.ErrNotExist) {
			if err := root.RemoveAll(rel); err != nil {
				return 0, fmt.Errorf("checkout %s: removing %s: %w", Short(commit), p, err)
			}
		}
		removeEmptyParents(root, filepath.Dir(rel))
	}
	// Every file written by one checkout gets the same modification time.
	// Trees imported from release tarballs track generated files (bison
	// and flex outputs, sql_help.h) beside their inputs; written one after
	// the other, an input would look newer than its output, and make would
	// regenerate the output where it found it: in the source, which the
	// build user cannot write. Files written together look as old as each
	// other, and newer than anything built before.
	stamp := time.Now()
	for i, p := range writes {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		if err := writeEntry(repo, root, p, target[p]); err != nil {
			return 0, fmt.Errorf("checkout %s: %w", Short(commit), err)
		}
		if target[p].mode != filemode.Symlink {
			if err := root.Chtimes(filepath.FromSlash(p), stamp, stamp); err != nil {
				return 0, fmt.Errorf("checkout %s: %w", Short(commit), err)
			}
		}
	}
	if err := writeManifest(w.manifestPath(), target); err != nil {
		return 0, err
	}
	if err := os.Remove(w.pendingPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	return len(writes) + len(deletes), nil
}

// onDisk reports whether the file at p under root has e's content and
// mode.
func onDisk(root *os.Root, p string, e fileEntry) bool {
	rel := filepath.FromSlash(p)
	fi, err := root.Lstat(rel)
	if err != nil {
		return false
	}
	switch e.mode {
	case filemode.Symlink:
		if fi.Mode()&os.ModeSymlink == 0 {
			return false
		}
		target, err := root.Readlink(rel)
		return err == nil && plumbing.ComputeHash(plumbing.BlobObject, []byte(target)) == e.hash
	case filemode.Executable:
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o100 == 0 {
			return false
		}
	default:
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o100 != 0 {
			return false
		}
	}
	f, err := root.Open(rel)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() != fi.Size() {
		return false // replaced since the Lstat
	}
	h := plumbing.NewHasher(plumbing.BlobObject, fi.Size())
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	return h.Sum() == e.hash
}

// treeFiles lists every file of a tree without reading any blob.
func treeFiles(tree *object.Tree) (map[string]fileEntry, error) {
	files := map[string]fileEntry{}
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		name, e, err := walker.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if e.Mode == filemode.Dir || e.Mode == filemode.Submodule {
			continue
		}
		files[name] = fileEntry{mode: e.Mode, hash: e.Hash}
	}
}

// diffEntries compares two file sets: the paths that to has and from has
// not, or has with another blob or mode, and the paths only from has.
func diffEntries(from, to map[string]fileEntry) (changed, gone []string) {
	for p, e := range to {
		if o, ok := from[p]; !ok || o != e {
			changed = append(changed, p)
		}
	}
	for p := range from {
		if _, ok := to[p]; !ok {
			gone = append(gone, p)
		}
	}
	return changed, gone
}

// checkCheckout refuses a commit whose tree pgbisect will not write
// (checkTree): a pull request's commit is anyone's tree.
func checkCheckout(repo *Repo, commit string, target map[string]fileEntry) error {
	all := make(map[string]treeEntry, len(target))
	for p, e := range target {
		all[p] = treeEntry{symlink: e.mode == filemode.Symlink, target: repo.blobText(e.hash)}
	}
	return checkTree(all, func(_ treeEntry, path, reason string) error {
		return &RefusedError{Commit: commit, Path: path, Reason: reason}
	})
}

// writeEntry writes the file p (slash-separated) of e under root.
func writeEntry(repo *Repo, root *os.Root, p string, e fileEntry) error {
	rel := filepath.FromSlash(p)
	blob, err := repo.repo.BlobObject(e.hash)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	r, err := blob.Reader()
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer r.Close()
	if dir := filepath.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			// A file (or a link) where a directory must go: remove it.
			if err := removeFileAncestor(root, dir); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
	}
	if fi, err := root.Lstat(rel); err == nil && (fi.IsDir() || fi.Mode()&os.ModeSymlink != 0 || e.mode == filemode.Symlink) {
		if err := root.RemoveAll(rel); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	if e.mode == filemode.Symlink {
		target, err := io.ReadAll(io.LimitReader(r, maxLinkTarget+1))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return root.Symlink(string(target), rel)
	}
	perm := os.FileMode(0o644)
	if e.mode == filemode.Executable {
		perm = 0o755
	}
	// O_EXCL: the old file was removed above if it was a link; a link
	// appearing since is not followed.
	if err := root.Remove(rel); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %w", p, err)
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", p, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", p, err)
	}
	return f.Close()
}

// removeFileAncestor removes the file or link that stands under root where
// a directory on the way to dir must be.
func removeFileAncestor(root *os.Root, dir string) error {
	for d := dir; d != "." && d != string(filepath.Separator); d = filepath.Dir(d) {
		if fi, err := root.Lstat(d); err == nil && !fi.IsDir() {
			return root.Remove(d)
		}
	}
	return nil
}

// removeEmptyParents removes dir and the directories above it under root
// while they are empty.
func removeEmptyParents(root *os.Root, dir string) {
	for dir != "." && dir != string(filepath.Separator) {
		if root.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

func dedup(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func readManifest(path string) (map[string]fileEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]fileEntry{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		mode, rest, ok1 := strings.Cut(sc.Text(), " ")
		hash, p, ok2 := strings.Cut(rest, " ")
		fm, err := filemode.New(mode)
		if !ok1 || !ok2 || err != nil || !plumbing.IsHash(hash) || pathProblem(p) != "" {
			return nil, fmt.Errorf("corrupt manifest %s", path)
		}
		m[p] = fileEntry{mode: fm, hash: plumbing.NewHash(hash)}
	}
	return m, sc.Err()
}

func writeManifest(path string, files map[string]fileEntry) error {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		e := files[p]
		fmt.Fprintf(&b, "%o %s %s\n", uint32(e.mode), e.hash, p)
	}
	return writeFileAtomic(path, []byte(b.String()), 0o644)
}

func readLines(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

func writeFileAtomic(name string, data []byte, perm os.FileMode) error {
	tmp := fmt.Sprintf("%s.tmp%d", name, os.Getpid())
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
