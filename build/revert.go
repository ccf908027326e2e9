package build

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/utils/diff"
	"github.com/sergi/go-diff/diffmatchpatch"
)

// Revert records, as ApplyPatches does, base with the given commits
// reverted, the way git revert does it: every file a commit changed
// against its first parent is merged three ways, the commit's version as
// the common ancestor, base's version as ours and the parent's as theirs.
// Later commits that changed other lines of the same files, or the lines
// around the commit's (real history does that all the time), do not stop
// it; only lines both the commit and a later commit changed do, and the
// error is then an *ApplyError naming the file and base's lines, as git
// revert would conflict there too.
//
// The commits may be given in any order: each is reverted before the
// commits it descends from, the order that undoes them cleanly.
func (r *Repo) Revert(base string, commits ...string) (Commit, error) {
	bc, tree, files, err := r.revertFiles(base, commits)
	if err != nil {
		return Commit{}, err
	}
	if err := r.checkPatched(bc, tree, files); err != nil {
		return Commit{}, err
	}
	return r.record(bc, tree, files)
}

// revertFiles merges the reverts of commits on top of base (Revert)
// without writing anything: base, its tree and the files changed.
func (r *Repo) revertFiles(base string, commits []string) (*object.Commit, *object.Tree, map[string]*treeFile, error) {
	order, err := r.newestFirst(commits)
	if err != nil {
		return nil, nil, nil, err
	}
	bc, err := r.resolve(base)
	if err != nil {
		return nil, nil, nil, err
	}
	tree, err := bc.Tree()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("tree of %s: %w", Short(bc.Hash.String()), err)
	}
	ours, err := treeFiles(tree)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("tree of %s: %w", Short(bc.Hash.String()), err)
	}
	files := map[string]*treeFile{}
	for _, c := range order {
		if err := r.revertOne(c, bc, ours, files); err != nil {
			return nil, nil, nil, err
		}
	}
	return bc, tree, files, nil
}

// newestFirst orders commits so that each comes before the commits it
// descends from.
func (r *Repo) newestFirst(commits []string) ([]string, error) {
	order := slices.Clone(commits)
	for i := 1; i < len(order); i++ {
		// Insertion sort, descendants first: a handful of culprits.
		for j := i; j > 0; j-- {
			older, err := r.IsAncestor(order[j-1], order[j])
			if err != nil {
				return nil, err
			}
			if !older || order[j-1] == order[j] {
				break
			}
			order[j-1], order[j] = order[j], order[j-1]
		}
	}
	return order, nil
}

// RevertBase finds where commits can be reverted when their revert
// conflicts on top of bad (later commits changed the same lines, as
// happens in a long real range): the latest commit of bad's first-parent
// chain after the newest of commits that holds them all and on which
// Revert merges. It searches by halves (a revert that conflicts at a
// commit conflicts at its descendants as a rule, as the later changes
// stay), writes nothing, and returns the base with how many commits of
// the chain lie after it, up to bad. An error means it conflicts on the
// first commit after the newest culprit already.
func (r *Repo) RevertBase(bad string, commits ...string) (Commit, int, error) {
	order, err := r.newestFirst(commits)
	if err != nil {
		return Commit{}, 0, err
	}
	if len(order) == 0 {
		return Commit{}, 0, fmt.Errorf("no commit to revert")
	}
	newest, err := r.Resolve(order[0])
	if err != nil {
		return Commit{}, 0, err
	}
	chain, err := r.Range(newest.Hash, bad, true)
	if err != nil {
		return Commit{}, 0, err
	}
	// Only commits after the newest: on top of a culprit itself the
	// revert is its parent's tree, and measuring that tells nothing new.
	cands := chain
	merges := func(i int) (bool, error) {
		for _, c := range order {
			if ok, err := r.IsAncestor(c, cands[i].Hash); err != nil || !ok {
				return false, err
			}
		}
		_, _, _, err := r.revertFiles(cands[i].Hash, order)
		var ae *ApplyError
		if errors.As(err, &ae) {
			return false, nil
		}
		return err == nil, err
	}
	if len(cands) == 0 {
		return Commit{}, 0, fmt.Errorf("%s is not a descendant of %s", Short(bad), newest.Short())
	}
	last := len(cands) - 1
	if ok, err := merges(last); err != nil || ok {
		return cands[last], 0, err
	}
	if ok, err := merges(0); err != nil {
		return Commit{}, 0, err
	} else if !ok {
		return Commit{}, 0, fmt.Errorf("it conflicts already on top of %s, the next commit after %s", cands[0].Short(), newest.Short())
	}
	lo, hi := 0, last // the revert merges on top of lo and conflicts on top of hi
	for hi-lo > 1 {
		m := (lo + hi) / 2
		ok, err := merges(m)
		if err != nil {
			return Commit{}, 0, err
		}
		if ok {
			lo = m
		} else {
			hi = m
		}
	}
	return cands[lo], last - lo, nil
}

// revertOne merges the undoing of commit into files (the changes made so
// far on top of base, whose own files are ours).
func (r *Repo) revertOne(commit string, bc *object.Commit, ours map[string]fileEntry, files map[string]*treeFile) error {
	c, err := r.resolve(commit)
	if err != nil {
		return err
	}
	name := "revert of " + Short(c.Hash.String())
	if c.NumParents() == 0 || r.shallowCommits()[c.Hash] {
		return fmt.Errorf("%s: %s has no parent here (a root commit, or a shallow clone's first): there is no change to revert", name, Short(c.Hash.String()))
	}
	p, err := c.Parent(0)
	if err != nil {
		return fmt.Errorf("%s: parent: %w", name, err)
	}
	cf, err := commitFiles(c)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	pf, err := commitFiles(p)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	changed, gone := diffEntries(pf, cf)
	paths := append(changed, gone...)
	sort.Strings(paths)
	for _, path := range paths {
		if err := r.revertFile(name, path, bc, cf, pf, ours, files); err != nil {
			return err
		}
	}
	return nil
}

// revertFile merges one file: what the commit made of it (the ancestor),
// what base has now (ours, with earlier reverts) and what it was before
// the commit (theirs).
func (r *Repo) revertFile(name, path string, bc *object.Commit, cf, pf, ours map[string]fileEntry, files map[string]*treeFile) error {
	conflict := func(format string, args ...any) error {
		return &ApplyError{Patch: name, File: path, Reason: fmt.Sprintf(format, args...) + " (git revert would conflict here too)"}
	}
	ce, inC := cf[path]
	pe, inP := pf[path]
	var now []byte
	var nowMode filemode.FileMode
	inOurs := false
	if f, ok := files[path]; ok {
		if !f.deleted {
			now, nowMode, inOurs = f.data, f.mode, true
		}
	} else if e, ok := ours[path]; ok {
		data, err := r.blobData(e.hash)
		if err != nil {
			return fmt.Errorf("%s: reading %s at %s: %w", name, path, Short(bc.Hash.String()), err)
		}
		now, nowMode, inOurs = data, e.mode, true
	}
	switch {
	case inC && !inP: // the commit added it: the revert deletes it
		if !inOurs {
			return nil
		}
		added, err := r.blobData(ce.hash)
		if err != nil {
			return err
		}
		if !bytes.Equal(now, added) {
			return conflict("the commit added this file and a later commit changed it")
		}
		files[path] = &treeFile{deleted: true, patch: name}
		return nil
	case !inC && inP: // the commit deleted it: the revert brings it back
		old, err := r.blobData(pe.hash)
		if err != nil {
			return err
		}
		if inOurs && !bytes.Equal(now, old) {
			return conflict("the commit deleted this file and a later commit created it again")
		}
		files[path] = &treeFile{data: old, mode: pe.mode, patch: name}
		return nil
	}
	if !inOurs {
		return conflict("the commit changed this file and a later commit deleted it")
	}
	mode := nowMode
	switch {
	case nowMode == ce.mode:
		mode = pe.mode
	case pe.mode != ce.mode && nowMode != pe.mode:
		return conflict("the commit changed its mode and so did a later commit")
	}
	ancestor, err := r.blobData(ce.hash)
	if err != nil {
		return err
	}
	before, err := r.blobData(pe.hash)
	if err != nil {
		return err
	}
	var merged []byte
	switch {
	case bytes.Equal(now, ancestor):
		merged = before
	case bytes.Equal(now, before) || bytes.Equal(ancestor, before):
		merged = now
	case isBinary(now) || isBinary(ancestor) || isBinary(before):
		return conflict("a binary file that a later commit changed too")
	default:
		out, at := merge3(ancestor, now, before)
		if at != nil {
			return conflict("a later commit changed the lines this commit changed (lines %s of %s)", at, Short(bc.Hash.String()))
		}
		merged = out
	}
	files[path] = &treeFile{data: merged, mode: mode, patch: name}
	return nil
}

// commitFiles lists a commit's files (path → blob and mode).
func commitFiles(c *object.Commit) (map[string]fileEntry, error) {
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", Short(c.Hash.String()), err)
	}
	files, err := treeFiles(t)
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", Short(c.Hash.String()), err)
	}
	return files, nil
}

// blobData reads a blob whole.
func (r *Repo) blobData(h plumbing.Hash) ([]byte, error) { return r.blobPrefix(h, -1) }

// blobPrefix reads at most n bytes of a blob (all of it when n < 0).
func (r *Repo) blobPrefix(h plumbing.Hash, n int64) ([]byte, error) {
	blob, err := r.repo.BlobObject(h)
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", Short(h.String()), err)
	}
	rd, err := blob.Reader()
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", Short(h.String()), err)
	}
	defer rd.Close()
	var in io.Reader = rd
	if n >= 0 {
		in = io.LimitReader(rd, n)
	}
	data, err := io.ReadAll(in)
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", Short(h.String()), err)
	}
	return data, nil
}

// isBinary is git's test: a NUL byte in the first 8,000.
func isBinary(b []byte) bool {
	if len(b) > 8000 {
		b = b[:8000]
	}
	return bytes.IndexByte(b, 0) >= 0
}

// lineRange names lines of ours, counted from 1, in a conflict.
type lineRange struct{ from, to int }

func (l *lineRange) String() string {
	if l.to <= l.from {
		return fmt.Sprintf("%d", l.from)
	}
	return fmt.Sprintf("%d-%d", l.from, l.to)
}

// merge3 merges two descendants of ancestor line by line, as diff3 and
// git's merge do: the lines both sides kept unchanged split the files into
// chunks; a chunk one side changed takes that side's lines, a chunk both
// changed the same way takes them once, and a chunk both changed
// differently (or changes that touch) is a conflict, returned as ours's
// lines there.
func merge3(ancestor, ours, theirs []byte) ([]byte, *lineRange) {
	a, o, t := splitLines(ancestor), splitLines(ours), splitLines(theirs)
	mo, mt := matchLines(ancestor, ours, len(a)), matchLines(ancestor, theirs, len(a))
	var out bytes.Buffer
	i, j, k := 0, 0, 0
	for i < len(a) || j < len(o) || k < len(t) {
		if i < len(a) && mo[i] == j && mt[i] == k {
			out.WriteString(a[i])
			i, j, k = i+1, j+1, k+1
			continue
		}
		// The next line of the ancestor both sides kept.
		ni, nj, nk := len(a), len(o), len(t)
		for x := i; x < len(a); x++ {
			if mo[x] >= 0 && mt[x] >= 0 {
				ni, nj, nk = x, mo[x], mt[x]
				break
			}
		}
		base, oc, tc := a[i:ni], o[j:nj], t[k:nk]
		switch {
		case slices.Equal(base, oc):
			writeLines(&out, tc)
		case slices.Equal(base, tc), slices.Equal(oc, tc):
			writeLines(&out, oc)
		default:
			return nil, &lineRange{from: j + 1, to: nj}
		}
		i, j, k = ni, nj, nk
	}
	return out.Bytes(), nil
}

// matchLines maps each line of from to the line of to it is kept as, or
// -1 where the line diff of the two deletes it.
func matchLines(from, to []byte, n int) []int {
	m := make([]int, n)
	for x := range m {
		m[x] = -1
	}
	i, j := 0, 0
	for _, d := range diff.DoWithTimeout(string(from), string(to), 10*time.Second) {
		lines := countLines(d.Text)
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			for x := 0; x < lines && i < n; x++ {
				m[i] = j
				i, j = i+1, j+1
			}
		case diffmatchpatch.DiffDelete:
			i += lines
		case diffmatchpatch.DiffInsert:
			j += lines
		}
	}
	return m
}

func countLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

func writeLines(b *bytes.Buffer, lines []string) {
	for _, l := range lines {
		b.WriteString(l)
	}
}
