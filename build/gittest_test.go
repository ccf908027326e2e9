package build

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// testRepo is a git repository made by a test with go-git plumbing, so
// every commit (and its hash) is deterministic.
type testRepo struct {
	t    *testing.T
	dir  string
	git  *git.Repository
	base time.Time
	n    int
	// exec names the top-level files stored as executables.
	exec map[string]bool
}

func newTestRepo(t *testing.T) *testRepo {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	return &testRepo{t: t, dir: dir, git: r, base: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// commit stores a commit with the full file set files (path -> content,
// "" content is stored as empty) and returns its hash.
func (r *testRepo) commit(msg string, parents []string, files map[string]string) string {
	r.t.Helper()
	tree := r.tree(files)
	r.n++
	when := r.base.Add(time.Duration(r.n) * time.Hour)
	return r.store(msg, tree, parents, when)
}

func (r *testRepo) store(msg string, tree plumbing.Hash, parents []string, when time.Time) string {
	r.t.Helper()
	sig := object.Signature{Name: "Test Author", Email: "author@example.org", When: when}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg + "\n", TreeHash: tree}
	for _, p := range parents {
		c.ParentHashes = append(c.ParentHashes, plumbing.NewHash(p))
	}
	obj := r.git.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		r.t.Fatal(err)
	}
	h, err := r.git.Storer.SetEncodedObject(obj)
	if err != nil {
		r.t.Fatal(err)
	}
	return h.String()
}

func (r *testRepo) tree(files map[string]string) plumbing.Hash {
	r.t.Helper()
	type node struct {
		files map[string]string
		dirs  map[string]map[string]string
	}
	n := node{files: map[string]string{}, dirs: map[string]map[string]string{}}
	for p, content := range files {
		if dir, rest, ok := strings.Cut(p, "/"); ok {
			if n.dirs[dir] == nil {
				n.dirs[dir] = map[string]string{}
			}
			n.dirs[dir][rest] = content
		} else {
			n.files[p] = content
		}
	}
	var entries []object.TreeEntry
	for name, content := range n.files {
		obj := r.git.Storer.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, _ := obj.Writer()
		w.Write([]byte(content))
		w.Close()
		h, err := r.git.Storer.SetEncodedObject(obj)
		if err != nil {
			r.t.Fatal(err)
		}
		mode := filemode.Regular
		if r.exec[name] {
			mode = filemode.Executable
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: mode, Hash: h})
	}
	for name, sub := range n.dirs {
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: r.tree(sub)})
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i].Name, entries[j].Name
		if entries[i].Mode == filemode.Dir {
			a += "/"
		}
		if entries[j].Mode == filemode.Dir {
			b += "/"
		}
		return a < b
	})
	obj := r.git.Storer.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		r.t.Fatal(err)
	}
	h, err := r.git.Storer.SetEncodedObject(obj)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

func (r *testRepo) ref(name, hash string) {
	r.t.Helper()
	if err := r.git.Storer.SetReference(plumbing.NewHashReference(plumbing.ReferenceName(name), plumbing.NewHash(hash))); err != nil {
		r.t.Fatal(err)
	}
}

func (r *testRepo) open() *Repo {
	r.t.Helper()
	repo, err := Open(context.Background(), r.dir, "", nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return repo
}

// with returns a copy of files with the given changes ("" deletes).
func with(files map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}
