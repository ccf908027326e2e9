package build

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// An incremental build installs only what changed (docs/build.md,
// "Installing only what changed"): its staging directory starts as a copy
// of the parent's cached install made of hard links (the parent being the
// commit the worktree last built), and make install runs only in the build
// directories whose products the incremental make changed. When in doubt
// the build installs everything into an empty staging directory, as a
// full build does.
//
// A cached install is never changed through a shared link:
//   - the staged links are root's (0644/0755) when builds run as another
//     user, who cannot write them; pgbisect not being root, cached files are
//     read-only (makeReadable) and only then linked; root building as root
//     never links;
//   - the tools PostgreSQL's install rules use replace files rather than
//     writing into them: GNU install unlinks the destination first,
//     config/install-sh renames a temporary file over it, symbolic links
//     are removed and made again, zic removes each file before writing it;
//     the one rule that writes with cp (src/include's server headers)
//     never runs on a linked stage, since a changed header forces a full
//     install, and neither does the documentation's cp -R (make install
//     runs only where build products changed, never in doc/);
//   - pgbisect-install.json, which pgbisect writes in place, is not linked.

// maxPartialDirs bounds the directories a partial install runs make
// install in; more than that (a change to a library every program links)
// installs everything.
const maxPartialDirs = 12

// partialInstall is the plan of an install of only what changed.
type partialInstall struct {
	parent *Install // the cached install the staging directory starts from
	dirs   []string // build directories (relative, slash-separated) to run make install in
	// products are the changed products of each of dirs (file names),
	// which make install takes as made (make -o): the build's make just
	// made them and everything else, so make install need not check again
	// (in src/backend that check walks every subdirectory: 11-17 s of a
	// 14-20 s install, measured at load 20).
	products map[string][]string
}

// fullInstallBecause returns why the changes between the parent's tree and
// this build's force a full install, or "" when they do not. A partial
// install sees the build products make changed; the sources those come
// from (.c, .y, .l) and the paths that are neither compiled nor installed
// (noCompile: documentation, tests, translations) need nothing more. Any
// other file may be installed as it is (a header, a .sql script, a sample
// configuration, time zone data) or change what is installed (a Makefile,
// configure's inputs), and installs everything. Partial installs are made
// by configure builds only; the paths such a build never reads
// (measuredIgnores) need nothing either.
func fullInstallBecause(sourceChanges, noCompile []string, o Options) string {
	for _, p := range sourceChanges {
		base := path.Base(p)
		switch {
		case strings.HasPrefix(base, "Makefile") || strings.HasPrefix(base, "GNUmakefile") || strings.HasSuffix(base, ".mk"):
			return p + " changed (a Makefile)"
		}
		for _, in := range configureInputs {
			if p == in || strings.HasPrefix(p, in+"/") {
				return p + " changed (an input of configure)"
			}
		}
		if !compiled(p, noCompile) || measuredIgnores(p, o) {
			continue
		}
		switch path.Ext(p) {
		case ".c", ".y", ".l":
		default:
			return p + " changed (make install may copy it as it is)"
		}
	}
	return ""
}

// productDirs lists the build directories (relative to buildDir) holding a
// build product modified at or after since, those make install must run
// in, with the names of their changed products. Objects, dependency files
// and object lists are not products. A changed header or a product at the
// top of the build tree returns a reason for a full install instead.
func productDirs(buildDir string, since time.Time) (dirs map[string][]string, why string, err error) {
	set := map[string][]string{}
	err = filepath.WalkDir(buildDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if name == ".deps" || name == "tmp_install" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		switch path.Ext(name) {
		case ".o", ".bc", ".Po", ".d":
			return nil
		}
		if name == "objfiles.txt" {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.ModTime().Before(since) {
			return nil
		}
		rel, err := filepath.Rel(buildDir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		dir := path.Dir(rel)
		switch {
		case why != "":
		case path.Ext(name) == ".h" || strings.HasPrefix(rel, "src/include/"):
			why = "generated header " + rel + " changed"
		case dir == "." || strings.HasPrefix(rel, "doc/"):
			why = rel + " changed"
		default:
			set[dir] = append(set[dir], name)
		}
		return nil
	})
	if err != nil || why != "" {
		return nil, why, err
	}
	if len(set) > maxPartialDirs {
		return nil, fmt.Sprintf("products changed in %d directories", len(set)), nil
	}
	return set, "", nil
}

// planPartial decides whether the build of commit, whose make ran in wt
// after the worktree last built prev (installed from since on), may install
// only what changed. It returns the plan, or nil and why not.
func (b *Builder) planPartial(wt *worktree, prev worktreeState, commit string, o Options, s *session) (*partialInstall, string) {
	switch {
	case o.Meson:
		return nil, "meson installs everything"
	case prev.Built == "" || prev.InstallStarted.IsZero():
		return nil, "no earlier build in this worktree"
	case prev.Built == commit:
		return nil, "the worktree last built this commit"
	case s.configured || s.cleaned:
		return nil, "configure or a clean rebuild ran"
	case proc.IsRoot() && !dropping(b.BuildAs):
		return nil, "root builds as root"
	}
	parent, ok := b.readInstall(prev.Built + "-" + o.Hash())
	if !ok || parent.Commit != prev.Built {
		return nil, "the last build's install is no longer cached"
	}
	changes, err := b.treeDiff(prev.Built, commit)
	if err != nil {
		return nil, "comparing with the last build: " + err.Error()
	}
	if why := fullInstallBecause(changes, o.noCompile(), o); why != "" {
		return nil, why
	}
	if !dropping(b.BuildAs) {
		if p, ok := writable(parent.Prefix); ok {
			return nil, "the last build's install has writable files (" + p + ")"
		}
	}
	// A second of slack for the filesystem's coarse clock: a directory too
	// many costs a make install, one too few a wrong install.
	products, why, err := productDirs(wt.build(), prev.InstallStarted.Add(-time.Second))
	if err != nil {
		return nil, "listing the build's products: " + err.Error()
	}
	if why != "" {
		return nil, why
	}
	dirs := make([]string, 0, len(products))
	for d := range products {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return &partialInstall{parent: parent, dirs: dirs, products: products}, ""
}

// treeDiff lists the paths that differ between two commits' trees.
func (b *Builder) treeDiff(from, to string) ([]string, error) {
	var trees [2]*object.Tree
	for i, h := range []string{from, to} {
		c, err := b.repo.repo.CommitObject(plumbing.NewHash(h))
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", Short(h), err)
		}
		if trees[i], err = c.Tree(); err != nil {
			return nil, fmt.Errorf("tree of %s: %w", Short(h), err)
		}
	}
	ch, err := diffTrees(trees[0], trees[1])
	if err != nil {
		return nil, err
	}
	return ch.paths(), nil
}

// writable returns a regular file of the install that its owner may
// write, if there is one.
func writable(prefix string) (string, bool) {
	var found string
	_ = filepath.WalkDir(prefix, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found != "" {
			return filepath.SkipAll
		}
		if !d.Type().IsRegular() || d.Name() == installFile {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o222 != 0 {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	return found, found != ""
}

// linkInstall makes dst (which must not exist) a copy of the cached
// install parent: directories made anew, symbolic links copied, regular
// files hard-linked, pgbisect-install.json left out. parent is a cache
// entry, pgbisect's own.
func linkInstall(parent, dst string) error {
	return filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(parent, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.Mkdir(to, 0o755); err != nil {
				return err
			}
			return os.Chmod(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			if rel == installFile {
				return nil
			}
			return os.Link(p, to)
		default:
			return fmt.Errorf("%s: unexpected file type %s in a cached install", p, d.Type())
		}
	})
}

// sameFile reports whether the staged file p (read through root) is the
// very file at parent/p: a link the partial install left in place.
func sameFile(root *os.Root, p, parent string) bool {
	if parent == "" {
		return false
	}
	a, err := root.Lstat(p)
	if err != nil {
		return false
	}
	b, err := os.Lstat(filepath.Join(parent, filepath.FromSlash(p)))
	if err != nil || !b.Mode().IsRegular() {
		return false
	}
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
