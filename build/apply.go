package build

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// PatchedRefPrefix is where synthetic commits are kept, so that they are
// never garbage-collected while their builds are cached. Nothing else
// refers to them: they are not on any branch.
const PatchedRefPrefix = "refs/pgbisect/patched/"

// ApplyError says which hunk of which file of which patch did not apply.
type ApplyError struct {
	Patch string // Patch.Name
	File  string // the path in the tree
	// Hunk counts from 1 within the file; 0 when the file as a whole does
	// not apply (missing, already there, binary without data).
	Hunk   int
	Hunks  int
	Header string // "@@ -612,7 +612,9 @@"
	Reason string
}

func (e *ApplyError) Error() string {
	if e.Hunk == 0 {
		return fmt.Sprintf("patch %s does not apply: %s: %s", e.Patch, e.File, e.Reason)
	}
	return fmt.Sprintf("patch %s does not apply: %s: hunk %d of %d (%s): %s", e.Patch, e.File, e.Hunk, e.Hunks, e.Header, e.Reason)
}

// treeFile is a file of the tree being patched.
type treeFile struct {
	data    []byte
	mode    filemode.FileMode
	deleted bool
	patch   string // the Patch.Name that wrote it last
}

// ApplyPatches applies patches in order on top of base (anything Resolve
// accepts) and records the result as a synthetic commit whose only parent
// is base, kept under PatchedRefPrefix. The commit's author, date and
// message depend only on base, so the same patched tree on the same base
// is always the same commit, and its hash is the build cache key: a patch
// tried twice, or a revert and a patch that make the same tree, build
// once. Nothing is written to the repository when a patch does not
// apply; the error is an *ApplyError. Nor when the patched tree would
// hold a path pgbisect does not write (see RefusedError): absolute, with
// a ".." or .git element, a file written through a symbolic link, a link
// out of its directory; the error is then a *RefusedError.
//
// Hunks are applied where their context and removed lines match exactly,
// at the line the hunk names or, as git apply does, at the nearest line
// above or below where they do (the file changed above the hunk).
func (r *Repo) ApplyPatches(base string, patches []Patch) (Commit, error) {
	bc, err := r.resolve(base)
	if err != nil {
		return Commit{}, err
	}
	tree, err := bc.Tree()
	if err != nil {
		return Commit{}, fmt.Errorf("tree of %s: %w", Short(bc.Hash.String()), err)
	}
	files := map[string]*treeFile{}
	load := func(path string) (*treeFile, error) {
		if f, ok := files[path]; ok {
			return f, nil
		}
		f := &treeFile{deleted: true}
		if e, err := tree.FindEntry(path); err == nil && e.Mode.IsFile() {
			data, err := r.blobData(e.Hash)
			if err != nil {
				return nil, fmt.Errorf("reading %s at %s: %w", path, Short(bc.Hash.String()), err)
			}
			f = &treeFile{data: data, mode: e.Mode}
		}
		files[path] = f
		return f, nil
	}
	for _, p := range patches {
		for _, fd := range p.Files {
			if err := checkFileNames(p.Name, fd); err != nil {
				return Commit{}, err
			}
			if err := applyFile(p.Name, fd, load, files); err != nil {
				return Commit{}, err
			}
		}
	}
	if err := r.checkPatched(bc, tree, files); err != nil {
		return Commit{}, err
	}

	return r.record(bc, tree, files)
}

// record stores base's tree with files changed as a synthetic commit on
// top of base, kept under PatchedRefPrefix: the same changes on the same
// base are always the same commit.
func (r *Repo) record(bc *object.Commit, tree *object.Tree, files map[string]*treeFile) (Commit, error) {
	s := r.repo.Storer
	changed := map[string]*treeFile{}
	for path, f := range files {
		changed[path] = f
	}
	treeHash, err := writeTree(s, tree, changed)
	if err != nil {
		return Commit{}, fmt.Errorf("writing the patched tree: %w", err)
	}
	sig := object.Signature{Name: "pgbisect", Email: "pgbisect@localhost", When: bc.Committer.When}
	c := &object.Commit{
		Author: sig, Committer: sig, TreeHash: treeHash, ParentHashes: []plumbing.Hash{bc.Hash},
		Message: fmt.Sprintf("pgbisect: patched tree on top of %s\n\nA synthetic commit: %s with patches applied or commits reverted.\n",
			Short(bc.Hash.String()), bc.Hash),
	}
	obj := s.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return Commit{}, err
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		return Commit{}, fmt.Errorf("storing the patched commit: %w", err)
	}
	if err := s.SetReference(plumbing.NewHashReference(plumbing.ReferenceName(PatchedRefPrefix+h.String()), h)); err != nil {
		return Commit{}, fmt.Errorf("keeping the patched commit under %s: %w", PatchedRefPrefix, err)
	}
	return r.Commit(h.String())
}

// applyFile applies one file's diff to the files being patched.
func applyFile(patch string, fd *gitdiff.File, load func(string) (*treeFile, error), files map[string]*treeFile) error {
	oldPath, newPath := fd.OldName, fd.NewName
	if fd.IsNew {
		oldPath = ""
	}
	if fd.IsDelete {
		newPath = ""
	}
	name := newPath
	if name == "" {
		name = oldPath
	}
	fail := func(format string, args ...any) error {
		return &ApplyError{Patch: patch, File: name, Reason: fmt.Sprintf(format, args...)}
	}
	var src []byte
	mode := filemode.Regular
	if oldPath != "" {
		f, err := load(oldPath)
		if err != nil {
			return err
		}
		if f.deleted {
			return fail("the file is not in the tree")
		}
		src, mode = f.data, f.mode
	} else if newPath != "" {
		f, err := load(newPath)
		if err != nil {
			return err
		}
		if !f.deleted {
			return fail("the patch creates it, but it is already in the tree")
		}
	}
	var out bytes.Buffer
	switch {
	case fd.IsBinary && fd.BinaryFragment == nil:
		return fail("a binary change without its data: make the patch with git diff --binary or git format-patch --binary")
	case fd.IsBinary:
		if err := gitdiff.Apply(&out, bytes.NewReader(src), fd); err != nil {
			return fail("the binary change does not apply: %v", err)
		}
	default:
		if err := applyText(&out, src, fd.TextFragments, patch, name); err != nil {
			return err
		}
	}
	if fd.NewMode != 0 {
		mode = filemode.FileMode(uint32(fd.NewMode))
	}
	if oldPath != "" && oldPath != newPath && !fd.IsCopy {
		files[oldPath] = &treeFile{deleted: true}
	}
	if newPath != "" {
		files[newPath] = &treeFile{data: out.Bytes(), mode: mode, patch: patch}
	}
	return nil
}

// checkFileNames refuses a file's diff whose old or new path pgbisect
// does not write (pathProblem), before anything is read or applied.
func checkFileNames(patch string, fd *gitdiff.File) error {
	for _, p := range []struct {
		name string
		used bool
	}{{fd.OldName, !fd.IsNew}, {fd.NewName, !fd.IsDelete}} {
		if !p.used {
			continue
		}
		if why := pathProblem(p.name); why != "" {
			return &RefusedError{Patch: patch, Path: p.name, Reason: why}
		}
	}
	return nil
}

// checkPatched refuses a patched tree that pgbisect would not check out
// (checkTree): the base's files with the patches' changes, each path
// blamed on the patch that wrote it, or on base when it was there.
func (r *Repo) checkPatched(bc *object.Commit, tree *object.Tree, files map[string]*treeFile) error {
	base, err := treeFiles(tree)
	if err != nil {
		return fmt.Errorf("tree of %s: %w", Short(bc.Hash.String()), err)
	}
	all := map[string]treeEntry{}
	for p, e := range base {
		all[p] = treeEntry{symlink: e.mode == filemode.Symlink, target: r.blobText(e.hash)}
	}
	for p, f := range files {
		if f.deleted {
			delete(all, p)
			continue
		}
		data := string(f.data)
		all[p] = treeEntry{symlink: f.mode == filemode.Symlink, target: func() (string, error) { return data, nil }, source: f.patch}
	}
	return checkTree(all, func(e treeEntry, path, reason string) error {
		if e.source == "" {
			return &RefusedError{Commit: bc.Hash.String(), Path: path, Reason: reason}
		}
		return &RefusedError{Patch: e.source, Path: path, Reason: reason}
	})
}

// blobText returns a reader of a blob's content, for a symbolic link's
// target: at most maxLinkTarget+1 bytes.
func (r *Repo) blobText(h plumbing.Hash) func() (string, error) {
	return func() (string, error) {
		data, err := r.blobPrefix(h, maxLinkTarget+1)
		if err != nil {
			return "", err
		}
		return string(data), nil // linkProblem refuses one that is too long
	}
}

// applyText applies the hunks of one file in order, each where its old
// lines match: at the position it names, else at the nearest offset above
// or below (never before the end of the hunk before it), as git apply
// does. go-gitdiff's TextApplier does the applying; this finds the place.
func applyText(dst io.Writer, src []byte, frags []*gitdiff.TextFragment, patch, name string) error {
	lines := splitLines(src)
	a := gitdiff.NewTextApplier(dst, bytes.NewReader(src))
	next := 0 // first line not yet consumed
	for i, frag := range frags {
		fail := func(reason string) error {
			return &ApplyError{Patch: patch, File: name, Hunk: i + 1, Hunks: len(frags), Header: strings.TrimSpace(frag.Header()), Reason: reason}
		}
		var old []string
		for _, l := range frag.Lines {
			if l.Old() {
				old = append(old, l.Line)
			}
		}
		want := int(frag.OldPosition) - 1
		if want < 0 {
			want = 0
		}
		at := -1
		if len(old) == 0 {
			at = max(want, next) // pure insertion: nothing to match
		} else {
			for d := 0; at < 0 && (want-d >= next || want+d+len(old) <= len(lines)); d++ {
				if s := want - d; s >= next && matchAt(lines, s, old) {
					at = s
				} else if s := want + d; d > 0 && matchAt(lines, s, old) {
					at = s
				}
			}
		}
		if at < 0 {
			return fail(mismatch(lines, want, old))
		}
		shifted := *frag
		shifted.OldPosition = int64(at) + 1
		if frag.OldPosition == 0 {
			shifted.OldPosition = 0
		}
		if err := a.ApplyFragment(&shifted); err != nil {
			return fail(err.Error())
		}
		next = at + len(old)
	}
	if err := a.Close(); err != nil {
		return &ApplyError{Patch: patch, File: name, Reason: err.Error()}
	}
	return nil
}

// mismatch says why old is not at line want: the first line that differs
// there (as git apply shows it), and that no offset has the hunk either.
func mismatch(lines []string, want int, old []string) string {
	for i, o := range old {
		n := want + i
		if n >= len(lines) {
			return fmt.Sprintf("the file has %d lines, the hunk expects %q at line %d; no other offset matches either", len(lines), strings.TrimRight(o, "\n"), n+1)
		}
		if lines[n] != o {
			return fmt.Sprintf("line %d is %q where the hunk expects %q, and its %d context and removed lines match at no other offset",
				n+1, strings.TrimRight(lines[n], "\n"), strings.TrimRight(o, "\n"), len(old))
		}
	}
	return fmt.Sprintf("its %d context and removed lines match at no offset after the previous hunk", len(old))
}

// matchAt reports whether lines[s:] starts with want.
func matchAt(lines []string, s int, want []string) bool {
	if s < 0 || s+len(want) > len(lines) {
		return false
	}
	for i, w := range want {
		if lines[s+i] != w {
			return false
		}
	}
	return true
}

// splitLines splits data after each newline; the last line may lack one.
func splitLines(data []byte) []string {
	var out []string
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, string(data))
			break
		}
		out = append(out, string(data[:i+1]))
		data = data[i+1:]
	}
	return out
}

// writeTree stores base with changes (path → new content, or deleted)
// and returns the new tree's hash. Directories left empty disappear, as
// git has no empty trees.
func writeTree(s storer.EncodedObjectStorer, base *object.Tree, changes map[string]*treeFile) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if base != nil {
		entries = append(entries, base.Entries...)
	}
	sub := map[string]map[string]*treeFile{}
	for path, f := range changes {
		dir, rest, nested := strings.Cut(path, "/")
		if nested {
			if sub[dir] == nil {
				sub[dir] = map[string]*treeFile{}
			}
			sub[dir][rest] = f
			continue
		}
		entries = removeEntry(entries, path)
		if !f.deleted {
			h, err := storeBlob(s, f.data)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			mode := f.mode
			if mode == filemode.Empty {
				mode = filemode.Regular
			}
			entries = append(entries, object.TreeEntry{Name: path, Mode: mode, Hash: h})
		}
	}
	for dir, ch := range sub {
		var subTree *object.Tree
		if base != nil {
			if t, err := base.Tree(dir); err == nil {
				subTree = t
			} else if !errors.Is(err, object.ErrDirectoryNotFound) {
				return plumbing.ZeroHash, fmt.Errorf("%s: %w", dir, err)
			}
		}
		h, err := writeTree(s, subTree, ch)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = removeEntry(entries, dir)
		if h != emptyTree {
			entries = append(entries, object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: h})
		}
	}
	if len(entries) == 0 {
		return emptyTree, nil
	}
	// Git orders entries by name, a directory as if its name ended in '/'.
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	obj := s.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}

// emptyTree is git's empty tree, never stored: its directory is dropped.
var emptyTree = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

func removeEntry(entries []object.TreeEntry, name string) []object.TreeEntry {
	out := entries[:0]
	for _, e := range entries {
		if e.Name != name {
			out = append(out, e)
		}
	}
	return out
}

func storeBlob(s storer.EncodedObjectStorer, data []byte) (plumbing.Hash, error) {
	obj := s.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(data); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}
