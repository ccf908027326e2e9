package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// rawEntry is one entry of a tree written as given: in this order, with
// any name, duplicates included (what a hostile pull request can push).
type rawEntry struct {
	name string
	mode filemode.FileMode
	data string     // a file's content, a link's target
	sub  []rawEntry // a directory's entries
}

func (r *testRepo) rawTree(entries ...rawEntry) plumbing.Hash {
	r.t.Helper()
	var out []object.TreeEntry
	for _, e := range entries {
		var h plumbing.Hash
		var err error
		if e.mode == filemode.Dir {
			h = r.rawTree(e.sub...)
		} else if h, err = storeBlob(r.git.Storer, []byte(e.data)); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, object.TreeEntry{Name: e.name, Mode: e.mode, Hash: h})
	}
	obj := r.git.Storer.NewEncodedObject()
	if err := (&object.Tree{Entries: out}).Encode(obj); err != nil {
		r.t.Fatal(err)
	}
	h, err := r.git.Storer.SetEncodedObject(obj)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

func (r *testRepo) rawCommit(entries ...rawEntry) string {
	r.t.Helper()
	r.n++
	return r.store("raw", r.rawTree(entries...), nil, r.base.Add(time.Duration(r.n)*time.Hour))
}

func file(name, data string) rawEntry {
	return rawEntry{name: name, mode: filemode.Regular, data: data}
}
func link(name, target string) rawEntry {
	return rawEntry{name: name, mode: filemode.Symlink, data: target}
}
func dir(name string, sub ...rawEntry) rawEntry {
	return rawEntry{name: name, mode: filemode.Dir, sub: sub}
}

// objectCount counts the objects and refs of a repository.
func objectCount(t *testing.T, repo *Repo) int {
	t.Helper()
	n := 0
	objs, err := repo.Git().Storer.IterEncodedObjects(plumbing.AnyObject)
	if err != nil {
		t.Fatal(err)
	}
	objs.ForEach(func(plumbing.EncodedObject) error { n++; return nil })
	refs, _ := repo.Git().References()
	refs.ForEach(func(*plumbing.Reference) error { n++; return nil })
	return n
}

// newFileDiff is the diff that creates name (any bytes, a NUL or a newline
// included, which no patch text could carry) with content, as a symbolic
// link when link is set.
func newFileDiff(t *testing.T, name, content string, link bool) *gitdiff.File {
	t.Helper()
	mode := "100644"
	if link {
		mode = "120000"
	}
	text := "diff --git a/placeholder b/placeholder\nnew file mode " + mode + "\n--- /dev/null\n+++ b/placeholder\n@@ -0,0 +1 @@\n+" + content + "\n\\ No newline at end of file\n"
	files, _, err := gitdiff.Parse(strings.NewReader(text))
	if err != nil || len(files) != 1 {
		t.Fatalf("fixture diff: %v", err)
	}
	files[0].NewName = name
	return files[0]
}

// wantRefused fails t unless err is a *RefusedError naming path and
// saying it was refused.
func wantRefused(t *testing.T, err error, path, reason string) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want a *RefusedError", err)
	}
	if re.Path != path {
		t.Errorf("refused path %q, want %q", re.Path, path)
	}
	msg := err.Error()
	for _, want := range []string{"refused", fmt.Sprintf("%q", clip(path)), reason} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
}

// TestPatchPathsRefused gives ParsePatches and ApplyPatches diffs of
// paths pgbisect must not write: absolute, "..", ".git" in its disguises,
// control characters. Each is refused by pgbisect with an error naming
// the path, and ApplyPatches writes no object and no ref for it. (Before,
// pgbisect accepted them all and stored the tree; only go-git's tree
// walker stood between "../../etc/cron.d/x" and root's checkout.)
func TestPatchPathsRefused(t *testing.T) {
	h := newPatchHistory(t)
	for _, tc := range []struct {
		path, reason string
	}{
		{"../../etc/cron.d/x", `".."`},
		{"src/../../x", `".."`},
		{"/etc/cron.d/x", "absolute"},
		{"./README.new", `"."`},
		{"src//x.c", "empty element"},
		{"src/x.c/", "empty element"},
		{".git/hooks/post-checkout", ".git"},
		{"src/.GIT/config", ".git"},
		{"src/.Git. . /config", ".git"},
		{".git  /config", ".git"},
		{"GIT~1/config", ".git"},
		{".g\u200cit/config", ".git"},
		{"src/x\x00.c", "control character"},
		{"src/x\n.c", "control character"},
		{"src/x\x1b[2J.c", "control character"},
	} {
		t.Run(strings.ToValidUTF8(tc.path, "?"), func(t *testing.T) {
			before := objectCount(t, h.repo)
			p := Patch{Name: "evil.patch", Files: []*gitdiff.File{newFileDiff(t, tc.path, "x", false)}}
			_, err := h.repo.ApplyPatches(h.parent, []Patch{p})
			wantRefused(t, err, tc.path, tc.reason)
			if !strings.HasPrefix(err.Error(), "patch evil.patch refused") {
				t.Errorf("the error does not start with the patch refused: %v", err)
			}
			if n := objectCount(t, h.repo); n != before {
				t.Errorf("a refused patch wrote %d objects or refs", n-before)
			}
			if strings.ContainsAny(tc.path, "\x00\n") || strings.Contains(tc.path, "/"+"/") || strings.HasSuffix(tc.path, "/") {
				return // no patch text carries these (go-gitdiff cleans doubled slashes)
			}
			text := "diff --git a/" + tc.path + " b/" + tc.path + "\nnew file mode 100644\n--- /dev/null\n+++ b/" + tc.path + "\n@@ -0,0 +1 @@\n+x\n"
			if tc.path[0] == '/' {
				text = "--- /dev/null\n+++ " + tc.path + "\n@@ -0,0 +1 @@\n+x\n" // a diff -u, not git's
			}
			ps, err := ParsePatches("evil.patch", []byte(text))
			if err == nil {
				t.Fatalf("ParsePatches accepted %q: %q", tc.path, ps[0].Files[0].NewName)
			}
			if !strings.Contains(err.Error(), "refused") {
				t.Errorf("ParsePatches: %v", err)
			}
		})
	}
	// A rename's old path is checked too.
	ps, err := ParsePatches("rename.patch", []byte("diff --git a/../x b/README2\nsimilarity index 100%\nrename from ../x\nrename to README2\n"))
	if err == nil || !strings.Contains(err.Error(), `"../x"`) {
		t.Errorf("a rename from ../x: %v %v", ps, err)
	}
}

// TestPatchSymlinksRefused: a patch may not make a symbolic link that
// points out of its directory, nor write a file through a link or
// through a file. Before, all were stored, and a later checkout wrote
// the links.
func TestPatchSymlinksRefused(t *testing.T) {
	r := newTestRepo(t)
	base := r.rawCommit(file("README", "readme\n"), link("lnk", "sub"), dir("sub", file("f", "f\n")))
	repo := r.open()
	for _, tc := range []struct {
		name   string
		files  []*gitdiff.File
		path   string
		reason string
	}{
		{"link up", []*gitdiff.File{newFileDiff(t, "evil", "../../etc", true)}, "evil", "out of its directory"},
		{"link up from a subdirectory", []*gitdiff.File{newFileDiff(t, "sub/evil", "../README", true)}, "sub/evil", "out of its directory"},
		{"absolute link", []*gitdiff.File{newFileDiff(t, "evil", "/etc", true)}, "evil", "absolute"},
		{"link into .git", []*gitdiff.File{newFileDiff(t, "evil", "sub/.git", true)}, "evil", ".git"},
		{"through the tree's link", []*gitdiff.File{newFileDiff(t, "lnk/x", "x", false)}, "lnk/x", `"lnk", a symbolic link`},
		{"through its own link", []*gitdiff.File{newFileDiff(t, "here", ".", true), newFileDiff(t, "here/x", "x", false)}, "here/x", `"here", a symbolic link`},
		{"through a file", []*gitdiff.File{newFileDiff(t, "README/x", "x", false)}, "README/x", `"README", a file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := objectCount(t, repo)
			_, err := repo.ApplyPatches(base, []Patch{{Name: "evil.patch", Files: tc.files}})
			wantRefused(t, err, tc.path, tc.reason)
			if n := objectCount(t, repo); n != before {
				t.Errorf("a refused patch wrote %d objects or refs", n-before)
			}
		})
	}
	// A link that stays in its directory is a link like any file.
	c, err := repo.ApplyPatches(base, []Patch{{Name: "ok.patch", Files: []*gitdiff.File{newFileDiff(t, "sub/g", "f", true)}}})
	if err != nil {
		t.Fatalf("a link to its neighbour: %v", err)
	}
	wt := &worktree{dir: t.TempDir()}
	if _, err := wt.checkout(context.Background(), repo, c.Hash); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(filepath.Join(wt.src(), "sub", "g")); err != nil || got != "f" {
		t.Errorf("sub/g links to %q (%v), want f", got, err)
	}
}

// TestCheckoutRefusesHostileTree checks out trees a pull request could
// push: a link to a directory outside beside a directory of the same
// name (git's tree walker accepts both names), and a link that climbs
// out. The checkout refuses them and writes nothing outside the source.
// Before, the first wrote lnk/x into the outside directory as root.
func TestCheckoutRefusesHostileTree(t *testing.T) {
	r := newTestRepo(t)
	for _, tc := range []struct {
		name    string
		entries func(outside string) []rawEntry
		path    string
		reason  string
	}{
		{"link and directory", func(outside string) []rawEntry {
			return []rawEntry{link("lnk", outside), dir("lnk", file("x", "pwned\n"))}
		}, "lnk", "absolute"},
		{"relative link and directory", func(outside string) []rawEntry {
			return []rawEntry{link("lnk", "../../../../../../../../.."+outside), dir("lnk", file("x", "pwned\n"))}
		}, "lnk", "out of its directory"},
		{"link up", func(string) []rawEntry { return []rawEntry{file("README", "r\n"), link("up", "../..")} }, "up", "out of its directory"},
		{"file and directory", func(string) []rawEntry { return []rawEntry{file("a", "a\n"), dir("a", file("x", "x\n"))} }, "a/x", `"a", a file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outside := t.TempDir()
			c := r.rawCommit(tc.entries(outside)...)
			repo := r.open()
			wt := &worktree{dir: t.TempDir()}
			_, err := wt.checkout(context.Background(), repo, c)
			if names, _ := os.ReadDir(outside); len(names) != 0 {
				t.Fatalf("the checkout wrote %s outside the source", names[0].Name())
			}
			wantRefused(t, err, tc.path, tc.reason)
			if !strings.HasPrefix(err.Error(), "commit "+Short(c)+" refused") {
				t.Errorf("the error does not name the commit first: %v", err)
			}
		})
	}
}

// TestCheckoutStaysInsideTheSource plants a link in the source pointing
// outside (as a missed check or an earlier pgbisect could leave one), then
// checks out a sound commit whose lnk/x goes through that name. The write
// goes through os.Root: the link is replaced by a directory and nothing is
// written outside. Before, os.MkdirAll followed the link and the file was
// written outside as root.
func TestCheckoutStaysInsideTheSource(t *testing.T) {
	outside := t.TempDir()
	r := newTestRepo(t)
	c0 := r.commit("zero", nil, map[string]string{"README": "r\n"})
	c1 := r.commit("one", []string{c0}, map[string]string{"README": "r\n", "lnk/x": "x\n"})
	repo := r.open()
	wt := &worktree{dir: t.TempDir()}
	ctx := context.Background()
	if _, err := wt.checkout(ctx, repo, c0); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(wt.src(), "lnk")); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.checkout(ctx, repo, c1); err != nil {
		t.Fatal(err)
	}
	if names, _ := os.ReadDir(outside); len(names) != 0 {
		t.Fatalf("the checkout wrote %s outside the source", names[0].Name())
	}
	if got := readFile(t, filepath.Join(wt.src(), "lnk", "x")); got != "x\n" {
		t.Errorf("lnk/x = %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(wt.src(), "lnk")); err != nil || !fi.IsDir() {
		t.Errorf("lnk is %v (%v), want a directory", fi.Mode(), err)
	}
	// A link planted at a file's own path is replaced, not written through.
	if err := os.Remove(filepath.Join(wt.src(), "README")); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(outside, "target")
	if err := os.WriteFile(target, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(wt.src(), "README")); err != nil {
		t.Fatal(err)
	}
	if err := wt.rewriteAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.checkout(ctx, repo, c1); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, target); got != "mine\n" {
		t.Errorf("the file outside became %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(wt.src(), "README")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("README is %v (%v), want a regular file", fi.Mode(), err)
	}
}

// TestPathProblem: the paths the checks let through are the ordinary ones.
func TestPathProblem(t *testing.T) {
	for _, p := range []string{"README", "src/backend/a.c", ".gitignore", "src/.gitattributes", "git", ".gitx/y", "..x", "x..", "a b/c", "ünïcode.c"} {
		if why := pathProblem(p); why != "" {
			t.Errorf("%q refused: %s", p, why)
		}
	}
	for _, target := range []string{"f", "sub/f", ".", "./f", "..f", "a/b/c"} {
		if why := linkProblem(target); why != "" {
			t.Errorf("a link to %q refused: %s", target, why)
		}
	}
	if why := linkProblem(strings.Repeat("a", maxLinkTarget+1)); why == "" {
		t.Error("a link target over PATH_MAX accepted")
	}
}
