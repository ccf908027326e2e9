package build

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/pgbisect/pgbisect/internal/testkit/fuzztest"
)

// FuzzParsePatches feeds ParsePatches, the reader of 'compare --patch'
// and of the patches a GitHub comment names, with git diffs, format-patch
// messages and mboxes. Whatever the bytes: no panic, the time bounded, and
// either patches that each carry files and a name under the patch's own
// name and paths pgbisect writes (checkFileNames), or an error that names
// the patch and quotes little of it. Reading the same bytes twice gives
// the same patches.
func FuzzParsePatches(f *testing.F) {
	for _, data := range fuzztest.Seeds(f, "testdata/patches/*") {
		f.Add(data)
	}
	f.Add([]byte("From x Mon\nSubject: 1\n\none\n\nFrom y Tue\nSubject: 2\n\ntwo\n"))
	f.Add([]byte("From: a@b\nContent-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: text/x-patch\nContent-Transfer-Encoding: quoted-printable\n\n" +
		"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a=3D\n+b\n--B--\n"))
	f.Add([]byte("diff --git a/new.c b/new.c\nnew file mode 100644\n--- /dev/null\n+++ b/new.c\n@@ -0,0 +1 @@\n+x\n"))
	f.Add([]byte("diff --git a/old.c b/renamed.c\nsimilarity index 100%\nrename from old.c\nrename to renamed.c\n"))
	const name = "fuzz.patch"
	f.Fuzz(func(t *testing.T, data []byte) {
		var ps []Patch
		var err error
		fuzztest.Within(t, func() { ps, err = ParsePatches(name, data) })
		if err != nil {
			if len(ps) != 0 {
				t.Errorf("an error (%v) and %d patches", err, len(ps))
			}
			if !strings.HasPrefix(err.Error(), "patch "+name) {
				t.Errorf("the error does not name the patch first: %v", err)
			}
			fuzztest.ShortError(t, err, len(name))
			return
		}
		if len(ps) == 0 {
			t.Fatal("no patches and no error")
		}
		for _, p := range ps {
			if len(p.Files) == 0 {
				t.Errorf("patch %q has no files", p.Name)
			}
			if !strings.HasPrefix(p.Name, name) {
				t.Errorf("patch named %q, not under %q", p.Name, name)
			}
			for _, fd := range p.Files {
				if err := checkFileNames(p.Name, fd); err != nil {
					t.Errorf("a path pgbisect refuses got through: %v", err)
				}
			}
		}
		again, err := ParsePatches(name, data)
		if err != nil {
			t.Fatalf("the second read failed: %v", err)
		}
		names := func(ps []Patch) (out []string) {
			for _, p := range ps {
				out = append(out, p.Name+"|"+p.Subject)
			}
			return out
		}
		if !slices.Equal(names(ps), names(again)) {
			t.Errorf("two reads of the same bytes: %q, then %q", names(ps), names(again))
		}
	})
}

// fuzzBase is the tree FuzzApplyPatches patches: text files in
// directories, an executable, a symbolic link to its neighbour.
var fuzzBase = map[string]*treeFile{
	"README":            {data: []byte("readme\n"), mode: filemode.Regular},
	"configure":         {data: []byte("#!/bin/sh\nexit 0\n"), mode: filemode.Executable},
	"src/backend/a.c":   {data: []byte(numbered("line", 1, 40)), mode: filemode.Regular},
	"src/backend/old.c": {data: []byte("old file\n"), mode: filemode.Regular},
	"src/include/h.h":   {data: []byte("#define H 1\n"), mode: filemode.Regular},
	"sub/f":             {data: []byte("f\n"), mode: filemode.Regular},
	"sub/lnk":           {data: []byte("f"), mode: filemode.Symlink},
}

// FuzzApplyPatches parses bytes as patches, applies them to fuzzBase with
// ApplyPatches and checks the result out into a temporary directory as
// the worktree does for root, with a symbolic link to a directory beside
// the worktree planted in the source first (as a missed check could leave
// one) at a path the fuzzer picks. Whatever the bytes: no panic, the time
// bounded; a patch that is not applied is an *ApplyError or a
// *RefusedError and stores nothing; one that is applied checks out to
// exactly its tree (every file, its content and its mode, no other file,
// no link out of its directory) and back to the base, and nothing beside
// the worktree is ever written.
func FuzzApplyPatches(f *testing.F) {
	for _, data := range fuzztest.Seeds(f, "testdata/patches/*") {
		f.Add(data, "")
	}
	f.Add([]byte("diff --git a/src/backend/a.c b/src/backend/a.c\n--- a/src/backend/a.c\n+++ b/src/backend/a.c\n@@ -4,3 +4,4 @@\n line 4\n line 5\n+SLOW\n line 6\n"), "")
	f.Add([]byte("diff --git a/src/backend/old.c b/src/backend/renamed.c\nsimilarity index 100%\nrename from src/backend/old.c\nrename to src/backend/renamed.c\n"), "src/backend/renamed.c")
	f.Add([]byte("diff --git a/sub/lnk b/sub/lnk\ndeleted file mode 120000\n--- a/sub/lnk\n+++ /dev/null\n@@ -1 +0,0 @@\n-f\n\\ No newline at end of file\n"), "sub/lnk")
	f.Add([]byte("diff --git a/evil b/evil\nnew file mode 120000\n--- /dev/null\n+++ b/evil\n@@ -0,0 +1 @@\n+../..\n\\ No newline at end of file\n"), "evil")
	f.Add([]byte("diff --git a/sub/lnk/x b/sub/lnk/x\nnew file mode 100644\n--- /dev/null\n+++ b/sub/lnk/x\n@@ -0,0 +1 @@\n+x\n"), "sub/lnk")
	f.Add([]byte("diff --git a/new/dir/x.c b/new/dir/x.c\nnew file mode 100755\n--- /dev/null\n+++ b/new/dir/x.c\n@@ -0,0 +1 @@\n+x\n"), "new")
	f.Add([]byte("diff --git a/README b/README\nold mode 100644\nnew mode 100755\n"), "README")
	f.Add([]byte("--- /dev/null\n+++ b/../../etc/cron.d/x\n@@ -0,0 +1 @@\n+* * * * * root sh\n"), "")
	f.Add([]byte("diff --git a/src/include/h.h b/src/include/h.h\ndeleted file mode 100644\n--- a/src/include/h.h\n+++ /dev/null\n@@ -1 +0,0 @@\n-#define H 1\n"+
		"diff --git a/src/include b/src/include\nnew file mode 100644\n--- /dev/null\n+++ b/src/include\n@@ -0,0 +1 @@\n+now a file\n"), "src/include/h.h")

	// The base, stored once; each input gets a fresh in-memory repository
	// holding only it, so inputs do not see each other's commits.
	baseStore := memory.NewStorage()
	treeHash, err := writeTree(baseStore, nil, fuzzBase)
	if err != nil {
		f.Fatal(err)
	}
	sig := object.Signature{Name: "fuzz", Email: "fuzz@localhost", When: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	obj := baseStore.NewEncodedObject()
	if err := (&object.Commit{Author: sig, Committer: sig, Message: "base\n", TreeHash: treeHash}).Encode(obj); err != nil {
		f.Fatal(err)
	}
	baseHash, err := baseStore.SetEncodedObject(obj)
	if err != nil {
		f.Fatal(err)
	}
	var baseObjects []plumbing.EncodedObject
	iter, _ := baseStore.IterEncodedObjects(plumbing.AnyObject)
	iter.ForEach(func(o plumbing.EncodedObject) error { baseObjects = append(baseObjects, o); return nil })

	f.Fuzz(func(t *testing.T, data []byte, planted string) {
		ps, err := ParsePatches("fuzz.patch", data)
		if err != nil {
			return // FuzzParsePatches checks these
		}
		st := memory.NewStorage()
		for _, o := range baseObjects {
			if _, err := st.SetEncodedObject(o); err != nil {
				t.Fatal(err)
			}
		}
		g, err := git.Init(st, nil)
		if err != nil {
			t.Fatal(err)
		}
		stored := len(st.Objects) + len(st.ReferenceStorage)
		repo := &Repo{dir: "fuzz", repo: g}
		var c Commit
		fuzztest.Within(t, func() { c, err = repo.ApplyPatches(baseHash.String(), ps) })
		if err != nil {
			var ae *ApplyError
			var re *RefusedError
			if !errors.As(err, &ae) && !errors.As(err, &re) {
				t.Fatalf("neither an *ApplyError nor a *RefusedError: %v", err)
			}
			if n := len(st.Objects) + len(st.ReferenceStorage); n != stored {
				t.Errorf("a patch not applied stored %d objects or refs", n-stored)
			}
			return
		}

		top := t.TempDir()
		outside := filepath.Join(top, "outside")
		if err := os.Mkdir(outside, 0o755); err != nil {
			t.Fatal(err)
		}
		wt := &worktree{dir: filepath.Join(top, "wt")}
		ctx := context.Background()
		if _, err := wt.checkout(ctx, repo, baseHash.String()); err != nil {
			t.Fatalf("checking out the base: %v", err)
		}
		if planted = strings.Trim(planted, "/"); filepath.IsLocal(planted) && planted != "" && !strings.ContainsRune(planted, 0) {
			full := filepath.Join(wt.src(), planted)
			_ = os.RemoveAll(full)
			if os.MkdirAll(filepath.Dir(full), 0o755) == nil {
				_ = os.Symlink(outside, full)
			}
			_ = wt.rewriteAll()
		}
		fuzztest.Within(t, func() { _, err = wt.checkout(ctx, repo, c.Hash) })
		if err != nil {
			t.Fatalf("checking out the patched tree: %v", err)
		}
		if names, _ := os.ReadDir(outside); len(names) != 0 {
			t.Fatalf("the checkout wrote %q outside the worktree", names[0].Name())
		}
		if names, _ := os.ReadDir(top); len(names) != 2 {
			t.Fatalf("the checkout wrote beside the worktree: %v", names)
		}
		sameTree(t, repo, c.Hash, wt.src(), planted)
		if _, err := wt.checkout(ctx, repo, baseHash.String()); err != nil {
			t.Fatalf("checking the base out again: %v", err)
		}
		if names, _ := os.ReadDir(outside); len(names) != 0 {
			t.Fatalf("the checkout wrote %q outside the worktree", names[0].Name())
		}
		sameTree(t, repo, baseHash.String(), wt.src(), planted)
	})
}

// sameTree fails t unless dir holds exactly the files of commit's tree
// (and the link planted there, when the tree does not replace it): their
// content, the executable bit, links with their targets.
func sameTree(t *testing.T, repo *Repo, commit, dir, planted string) {
	t.Helper()
	c, err := repo.repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := c.Tree()
	if err != nil {
		t.Fatal(err)
	}
	want, err := treeFiles(tree)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		e, ok := want[filepath.ToSlash(rel)]
		if !ok {
			if rel == planted && d.Type()&os.ModeSymlink != 0 {
				return nil // the planted link, where the tree has nothing
			}
			t.Errorf("%s is in the source but not in the tree", rel)
			return nil
		}
		seen++
		blob, err := repo.repo.BlobObject(e.hash)
		if err != nil {
			return err
		}
		r, _ := blob.Reader()
		content, _ := io.ReadAll(r)
		r.Close()
		fi, _ := os.Lstat(p)
		switch {
		case e.mode == filemode.Symlink:
			target, err := os.Readlink(p)
			if err != nil || target != string(content) {
				t.Errorf("%s: links to %q (%v), want %q", rel, target, err, content)
			}
			if why := linkProblem(target); why != "" {
				t.Errorf("%s %s", rel, why)
			}
		case !fi.Mode().IsRegular():
			t.Errorf("%s is %v, want a regular file", rel, fi.Mode())
		default:
			if got, _ := os.ReadFile(p); !bytes.Equal(got, content) {
				t.Errorf("%s holds %q, want %q", rel, got, content)
			}
			if exec := fi.Mode().Perm()&0o100 != 0; exec != (e.mode == filemode.Executable) {
				t.Errorf("%s has mode %v, tree mode %v", rel, fi.Mode(), e.mode)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != len(want) {
		t.Errorf("%d of the tree's %d files are in the source", seen, len(want))
	}
}
