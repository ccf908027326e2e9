package pgsrc

import (
	"fmt"
	"io"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// dirNode is a directory being built or edited. Subdirectories are loaded
// only along the paths that change, so a small commit on the 6,000-file
// PostgreSQL tree writes a handful of tree objects.
type dirNode struct {
	entries map[string]object.TreeEntry // files and not-yet-loaded subtrees
	sub     map[string]*dirNode         // loaded subdirectories (override entries)
	hash    plumbing.Hash               // stored hash, valid when !dirty
	dirty   bool
}

func newDirNode() *dirNode {
	return &dirNode{entries: map[string]object.TreeEntry{}, sub: map[string]*dirNode{}, dirty: true}
}

func loadDir(s storer.EncodedObjectStorer, h plumbing.Hash) (*dirNode, error) {
	t, err := object.GetTree(s, h)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", h, err)
	}
	d := &dirNode{entries: map[string]object.TreeEntry{}, sub: map[string]*dirNode{}, hash: h}
	for _, e := range t.Entries {
		d.entries[e.Name] = e
	}
	return d, nil
}

// set adds a file to a tree being built from nothing (Import).
func (d *dirNode) set(elems []string, mode filemode.FileMode, h plumbing.Hash) {
	for len(elems) > 1 {
		next, ok := d.sub[elems[0]]
		if !ok {
			next = newDirNode()
			d.sub[elems[0]] = next
		}
		d, elems = next, elems[1:]
	}
	d.entries[elems[0]] = object.TreeEntry{Name: elems[0], Mode: mode, Hash: h}
}

// child returns the loaded subdirectory name, loading it if needed; nil if
// there is no such directory.
func (d *dirNode) child(s storer.EncodedObjectStorer, name string, create bool) (*dirNode, error) {
	if c, ok := d.sub[name]; ok {
		return c, nil
	}
	if e, ok := d.entries[name]; ok && e.Mode == filemode.Dir {
		c, err := loadDir(s, e.Hash)
		if err != nil {
			return nil, err
		}
		d.sub[name] = c
		delete(d.entries, name)
		return c, nil
	}
	if !create {
		return nil, nil
	}
	if _, ok := d.entries[name]; ok {
		return nil, fmt.Errorf("%s is a file, not a directory", name)
	}
	c := newDirNode()
	d.sub[name] = c
	return c, nil
}

// setLoaded adds or replaces a file in an edited tree.
func (d *dirNode) setLoaded(s storer.EncodedObjectStorer, elems []string, mode filemode.FileMode, h plumbing.Hash) error {
	d.dirty = true
	for len(elems) > 1 {
		next, err := d.child(s, elems[0], true)
		if err != nil {
			return err
		}
		next.dirty = true
		d, elems = next, elems[1:]
	}
	if _, ok := d.sub[elems[0]]; ok {
		return fmt.Errorf("%s is a directory", elems[0])
	}
	d.entries[elems[0]] = object.TreeEntry{Name: elems[0], Mode: mode, Hash: h}
	return nil
}

// read returns a file's content and mode.
func (d *dirNode) read(s storer.EncodedObjectStorer, elems []string) (content string, mode filemode.FileMode, exists bool, err error) {
	for len(elems) > 1 {
		next, err := d.child(s, elems[0], false)
		if err != nil || next == nil {
			return "", 0, false, err
		}
		d, elems = next, elems[1:]
	}
	e, ok := d.entries[elems[0]]
	if !ok || e.Mode == filemode.Dir {
		return "", 0, false, nil
	}
	blob, err := object.GetBlob(s, e.Hash)
	if err != nil {
		return "", 0, false, err
	}
	r, err := blob.Reader()
	if err != nil {
		return "", 0, false, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return "", 0, false, err
	}
	return string(data), e.Mode, true, nil
}

// remove deletes a file (or directory) if it exists.
func (d *dirNode) remove(elems []string) {
	path := []*dirNode{d}
	for len(elems) > 1 {
		next, ok := d.sub[elems[0]]
		if !ok {
			e, isEntry := d.entries[elems[0]]
			if !isEntry || e.Mode != filemode.Dir {
				return
			}
			// Loading needs a storer; callers read before removing, which
			// loads the path, so an unloaded directory here has no such file.
			return
		}
		d, elems = next, elems[1:]
		path = append(path, d)
	}
	_, inEntries := d.entries[elems[0]]
	_, inSub := d.sub[elems[0]]
	if !inEntries && !inSub {
		return
	}
	delete(d.entries, elems[0])
	delete(d.sub, elems[0])
	for _, p := range path {
		p.dirty = true
	}
}

// store writes the tree objects that changed and returns the root's hash.
// Empty directories disappear, as in git.
func (d *dirNode) store(s storer.EncodedObjectStorer) (plumbing.Hash, error) {
	if !d.dirty {
		return d.hash, nil
	}
	entries := make([]object.TreeEntry, 0, len(d.entries)+len(d.sub))
	for _, e := range d.entries {
		entries = append(entries, e)
	}
	for name, c := range d.sub {
		h, err := c.store(s)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if h == emptyTree {
			continue
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	if len(entries) == 0 {
		return emptyTree, nil
	}
	// git orders entries by name, with directories compared as "name/".
	sort.Slice(entries, func(i, j int) bool { return sortName(entries[i]) < sortName(entries[j]) })
	obj := s.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	d.hash, d.dirty = h, false
	return h, nil
}

// emptyTree is git's well-known hash of the empty tree.
var emptyTree = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbef4904")

func sortName(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}
