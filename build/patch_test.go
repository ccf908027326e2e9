package build

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// numbered returns n lines "prefix i" as a file's content.
func numbered(prefix string, from, n int) string {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "%s %d\n", prefix, i)
	}
	return b.String()
}

// patchHistory is a repository where "culprit" changes two hunks of
// src/backend/a.c, adds, deletes and renames files, and "shift" (after it)
// adds lines above the culprit's hunks.
type patchHistory struct {
	r                      *testRepo
	repo                   *Repo
	parent, culprit, shift string
	files                  map[string]string // the parent's
}

func newPatchHistory(t *testing.T) patchHistory {
	r := newTestRepo(t)
	a := numbered("line", 1, 40)
	files := map[string]string{
		"README":             "readme\n",
		"src/backend/a.c":    a,
		"src/backend/old.c":  "old file\n",
		"src/include/gone.h": "goes away\n",
	}
	parent := r.commit("parent", nil, files)
	changed := strings.Replace(a, "line 5\n", "line 5\nSLOW 1\n", 1)
	changed = strings.Replace(changed, "line 30\n", "SLOW 2\n", 1)
	culpritFiles := with(files, "src/backend/a.c", changed, "src/backend/new.c", "new file\n",
		"src/include/gone.h", "", "src/backend/old.c", "", "src/backend/renamed.c", "old file\n")
	culprit := r.commit("Add the slow path", []string{parent}, culpritFiles)
	shifted := numbered("shift", 1, 7) + changed
	shift := r.commit("Add lines above", []string{culprit}, with(culpritFiles, "src/backend/a.c", shifted))
	return patchHistory{r: r, repo: r.open(), parent: parent, culprit: culprit, shift: shift, files: files}
}

func (h patchHistory) treeOf(t *testing.T, hash string) plumbing.Hash {
	t.Helper()
	c, err := h.repo.Git().CommitObject(plumbing.NewHash(hash))
	if err != nil {
		t.Fatal(err)
	}
	return c.TreeHash
}

// diffText is what git diff parent culprit prints (go-git's encoder).
func (h patchHistory) diffText(t *testing.T, from, to string) string {
	t.Helper()
	a, _ := h.repo.Git().CommitObject(plumbing.NewHash(from))
	b, _ := h.repo.Git().CommitObject(plumbing.NewHash(to))
	p, err := a.Patch(b)
	if err != nil {
		t.Fatal(err)
	}
	return p.String()
}

// TestApplyPatchMakesTheSameTree applies a commit's own diff to its parent:
// the synthetic commit must have exactly the commit's tree (new, deleted
// and renamed files, two hunks), the parent as its only parent, a private
// ref, and the same hash when made again.
func TestApplyPatchMakesTheSameTree(t *testing.T) {
	h := newPatchHistory(t)
	patches, err := ParsePatches("culprit.diff", []byte(h.diffText(t, h.parent, h.culprit)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.repo.ApplyPatches(h.parent, patches)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.treeOf(t, c.Hash), h.treeOf(t, h.culprit); got != want {
		t.Errorf("patched tree %s, want the culprit's %s", got, want)
	}
	if len(c.Parents) != 1 || c.Parents[0] != h.parent {
		t.Errorf("parents %v, want [%s]", c.Parents, h.parent)
	}
	if _, err := h.repo.Git().Reference(plumbing.ReferenceName(PatchedRefPrefix+c.Hash), false); err != nil {
		t.Errorf("no private ref for %s: %v", c.Hash, err)
	}
	again, err := h.repo.ApplyPatches(h.parent, patches)
	if err != nil || again.Hash != c.Hash {
		t.Errorf("the same patch on the same base made %s (%v), first %s: the build cache key would differ", again.Hash, err, c.Hash)
	}
	// The builder can key it like any commit.
	if _, err := h.repo.Resolve(c.Hash[:12]); err != nil {
		t.Errorf("resolving the synthetic commit: %v", err)
	}
}

// TestRevertWithOffset reverts the culprit on top of a commit that added
// lines above both its hunks: each hunk is found at its new offset, and
// the result is the later commit without the culprit's change.
func TestRevertWithOffset(t *testing.T) {
	h := newPatchHistory(t)
	c, err := h.repo.Revert(h.shift, h.culprit)
	if err != nil {
		t.Fatal(err)
	}
	want := h.r.commit("shift without culprit", []string{h.parent},
		with(h.files, "src/backend/a.c", numbered("shift", 1, 7)+h.files["src/backend/a.c"]))
	if got, w := h.treeOf(t, c.Hash), h.treeOf(t, want); got != w {
		t.Errorf("reverted tree %s, want %s", got, w)
	}
	if c.Parents[0] != h.shift {
		t.Errorf("parent %s, want the base %s", c.Parents[0], h.shift)
	}
	// Both commits reverted, given oldest first or newest first: the
	// newer is undone first, leaving the parent's tree.
	for _, order := range [][]string{{h.culprit, h.shift}, {h.shift, h.culprit}} {
		both, err := h.repo.Revert(h.shift, order...)
		if err != nil {
			t.Fatalf("reverting %v: %v", order, err)
		}
		if got, w := h.treeOf(t, both.Hash), h.treeOf(t, h.parent); got != w {
			t.Errorf("reverting both (%v) made tree %s, want the parent's %s", order, got, w)
		}
	}
}

// TestPatchDoesNotApply names the file and the hunk whose context is gone.
func TestPatchDoesNotApply(t *testing.T) {
	h := newPatchHistory(t)
	diff := h.diffText(t, h.parent, h.culprit)
	// The second hunk's context no longer matches anything in the file.
	broken := strings.Replace(diff, " line 29\n", " line 29 edited\n", 1)
	if broken == diff {
		t.Fatal("fixture: context line 29 not in the diff")
	}
	patches, err := ParsePatches("fix.patch", []byte(broken))
	if err != nil {
		t.Fatal(err)
	}
	refs, _ := h.repo.Git().References()
	before := 0
	refs.ForEach(func(*plumbing.Reference) error { before++; return nil })
	_, err = h.repo.ApplyPatches(h.parent, patches)
	var ae *ApplyError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want an *ApplyError", err)
	}
	msg := err.Error()
	for _, want := range []string{"fix.patch", "src/backend/a.c", "hunk 2 of 2", "@@ -27,", "line 29 edited"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	refs, _ = h.repo.Git().References()
	after := 0
	refs.ForEach(func(*plumbing.Reference) error { after++; return nil })
	if after != before {
		t.Errorf("a failed patch left %d refs behind", after-before)
	}
	// A file the tree does not have.
	missing := strings.ReplaceAll(diff, "src/backend/a.c", "src/backend/nothere.c")
	patches, _ = ParsePatches("fix.patch", []byte(missing))
	if _, err := h.repo.ApplyPatches(h.parent, patches); err == nil || !strings.Contains(err.Error(), "src/backend/nothere.c: the file is not in the tree") {
		t.Errorf("missing file: %v", err)
	}
	// Applying the culprit twice: its hunks' old lines are gone.
	patches, _ = ParsePatches("twice.patch", []byte(diff))
	if _, err := h.repo.ApplyPatches(h.culprit, patches); err == nil || !strings.Contains(err.Error(), "does not apply") {
		t.Errorf("a patch applied twice: %v", err)
	}
	if _, err := ParsePatches("empty.patch", []byte("just words\n")); err == nil || !strings.Contains(err.Error(), "holds no diff") {
		t.Errorf("no diff: %v", err)
	}
}

// TestMboxWithBase64Attachment reads a mailing-list mbox: a cover letter
// without a diff, a reply whose patch is a base64 attachment (the way
// most mail clients send it) beside a signature, and a git format-patch
// message sent inline. The two patches are applied in order.
func TestMboxWithBase64Attachment(t *testing.T) {
	h := newPatchHistory(t)
	first := h.diffText(t, h.parent, h.culprit)
	second := h.diffText(t, h.culprit, h.shift)
	enc := base64.StdEncoding.EncodeToString([]byte(first))
	var wrapped strings.Builder
	for len(enc) > 76 {
		wrapped.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	wrapped.WriteString(enc + "\r\n")
	mbox := "From someone@example.org Mon Jan  1 00:00:00 2024\n" +
		"From: Someone <someone@example.org>\nSubject: [PATCH 0/2] Speed things up\n\n" +
		"Here is a series. diff --git is mentioned, but nothing to apply.\n\n" +
		"From someone@example.org Mon Jan  1 00:01:00 2024\n" +
		"From: Someone <someone@example.org>\nSubject: =?UTF-8?Q?Re:_[PATCH]_v2_caf=C3=A9?=\n" +
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"XYZ\"\n\n" +
		"--XYZ\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nv2 attached.\r\n\r\n" +
		"--XYZ\r\nContent-Type: text/x-patch; name=\"v2-0001-slow.patch\"\r\n" +
		"Content-Disposition: attachment; filename=\"v2-0001-slow.patch\"\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		wrapped.String() +
		"--XYZ\r\nContent-Type: application/pgp-signature; name=\"signature.asc\"\r\n\r\n-----BEGIN PGP SIGNATURE-----\r\n--XYZ--\r\n\n" +
		"From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001\n" +
		"From: Someone <someone@example.org>\nDate: Mon, 1 Jan 2024 00:02:00 +0000\nSubject: [PATCH 2/2] Add lines above\n\n" +
		"The second one.\n---\n" + second
	path := filepath.Join(t.TempDir(), "thread.mbox")
	if err := os.WriteFile(path, []byte(mbox), 0o644); err != nil {
		t.Fatal(err)
	}
	patches, err := ReadPatchFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(patches) != 2 {
		t.Fatalf("%d patches, want 2: %+v", len(patches), patches)
	}
	if p := patches[0]; p.Name != "thread.mbox: message 2, attachment v2-0001-slow.patch" || p.Subject != "Re: [PATCH] v2 café" {
		t.Errorf("first patch %q, subject %q", p.Name, p.Subject)
	}
	if p := patches[1]; p.Name != "thread.mbox: message 3" || !strings.Contains(p.Subject, "Add lines above") {
		t.Errorf("second patch %q, subject %q", p.Name, p.Subject)
	}
	c, err := h.repo.ApplyPatches(h.parent, patches)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.treeOf(t, c.Hash), h.treeOf(t, h.shift); got != want {
		t.Errorf("tree after the mbox's two patches %s, want the later commit's %s", got, want)
	}
}

// TestSplitMbox keeps a single mail whole and splits only at "From "
// lines that follow an empty line.
func TestSplitMbox(t *testing.T) {
	one := "From: a@b\nSubject: x\n\nbody\nFrom here on\n"
	if got := splitMbox([]byte(one)); len(got) != 1 || string(got[0]) != one {
		t.Errorf("single mail split into %q", got)
	}
	two := "From x Mon\nSubject: 1\n\none\n\nFrom y Tue\nSubject: 2\n\ntwo\n"
	got := splitMbox([]byte(two))
	if len(got) != 2 || string(got[0]) != "Subject: 1\n\none\n\n" || string(got[1]) != "Subject: 2\n\ntwo\n" {
		t.Errorf("mbox split into %q", got)
	}
}

// TestFormatPatchWithDiffstat reads git format-patch output as it is
// mailed: a diffstat before the diff and the version signature after it.
func TestFormatPatchWithDiffstat(t *testing.T) {
	h := newPatchHistory(t)
	text := "From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001\n" +
		"From: Someone <someone@example.org>\nDate: Mon, 1 Jan 2024 00:02:00 +0000\n" +
		"Subject: [PATCH v3 1/1] Add the slow path\n\nLonger explanation.\n---\n" +
		" src/backend/a.c | 3 ++-\n 1 file changed, 2 insertions(+), 1 deletion(-)\n\n" +
		h.diffText(t, h.parent, h.culprit) + "-- \n2.39.2\n\n"
	patches, err := ParsePatches("v3-0001-Add-the-slow-path.patch", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(patches) != 1 || patches[0].Subject != "[PATCH v3 1/1] Add the slow path" {
		t.Fatalf("patches %+v", patches)
	}
	c, err := h.repo.ApplyPatches(h.parent, patches)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.treeOf(t, c.Hash), h.treeOf(t, h.culprit); got != want {
		t.Errorf("tree %s, want the culprit's %s", got, want)
	}
}
