package build

import (
	"sort"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// treeChanges are the differences between two trees, without rename
// detection: a rename is a deletion and an addition.
type treeChanges object.Changes

// diffTrees compares two trees; a nil tree is empty.
func diffTrees(from, to *object.Tree) (treeChanges, error) {
	ch, err := object.DiffTree(from, to)
	return treeChanges(ch), err
}

// paths returns the sorted, distinct paths the changes touch.
func (t treeChanges) paths() []string {
	set := map[string]bool{}
	for _, c := range t {
		if c.From.Name != "" {
			set[c.From.Name] = true
		}
		if c.To.Name != "" {
			set[c.To.Name] = true
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
