package build

import (
	"container/heap"
	"fmt"
	"sort"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// clockSkew is how far a committer date may run ahead of a child's. Walks
// that stop on dates (as git's do) go on this much further to stay correct
// when clocks were wrong.
const clockSkew = 24 * time.Hour

// walker visits commits newest first by committer date, as git rev-list
// does, so that a walk between two nearby commits reads only the commits
// between them and not the whole 60,000-commit history.
type walker struct {
	repo  *git.Repository
	queue commitQueue
	flags map[plumbing.Hash]uint8
	// shallow are the commits of a shallow clone whose parents are not
	// in the repository: the walk ends there, as git's does, instead of
	// failing on a parent it cannot read.
	shallow map[plumbing.Hash]bool
}

const (
	flagQueued uint8 = 1 << iota
	flagUninteresting
)

func newWalker(repo *git.Repository, shallow map[plumbing.Hash]bool) *walker {
	return &walker{repo: repo, flags: map[plumbing.Hash]uint8{}, shallow: shallow}
}

// parents returns the parents of c the walk follows: none for a shallow
// boundary commit.
func (w *walker) parents(c *object.Commit) []plumbing.Hash {
	if w.shallow[c.Hash] {
		return nil
	}
	return c.ParentHashes
}

// walk visits commits reachable from include, marking those reachable from
// exclude as uninteresting. visit is called for every commit popped (with
// whether it is interesting) and stops the walk by returning false. With
// firstParent, interesting commits continue only to their first parent.
// The walk ends when the queue is empty, or when nothing interesting is
// left and every queued commit is older than the oldest interesting commit
// seen, less clockSkew.
func (w *walker) walk(include, exclude []plumbing.Hash, firstParent bool, visit func(c *object.Commit, interesting bool) (bool, error)) error {
	for _, h := range exclude {
		if err := w.push(h, flagUninteresting); err != nil {
			return err
		}
	}
	for _, h := range include {
		if err := w.push(h, 0); err != nil {
			return err
		}
	}
	var oldestInteresting time.Time
	for w.queue.Len() > 0 {
		if len(exclude) > 0 && w.queue.interesting == 0 {
			limit := oldestInteresting.Add(-clockSkew)
			if oldestInteresting.IsZero() || w.queue.newest().Before(limit) {
				return nil
			}
		}
		c := heap.Pop(&w.queue).(*object.Commit)
		f := w.flags[c.Hash]
		interesting := f&flagUninteresting == 0
		if interesting {
			w.queue.interesting--
			if oldestInteresting.IsZero() || c.Committer.When.Before(oldestInteresting) {
				oldestInteresting = c.Committer.When
			}
		}
		more, err := visit(c, interesting)
		if err != nil || !more {
			return err
		}
		parents := w.parents(c)
		if interesting && firstParent && len(parents) > 1 {
			parents = parents[:1]
		}
		for _, p := range parents {
			if err := w.push(p, f&flagUninteresting); err != nil {
				return err
			}
		}
	}
	return nil
}

// push queues h with flags, or adds the uninteresting mark to a commit
// already seen (and to its seen ancestors, so the mark spreads even through
// commits visited before it arrived).
func (w *walker) push(h plumbing.Hash, flag uint8) error {
	old, seen := w.flags[h]
	if seen {
		if flag&flagUninteresting != 0 && old&flagUninteresting == 0 {
			w.markUninteresting(h)
		}
		return nil
	}
	c, err := w.repo.CommitObject(h)
	if err != nil {
		return fmt.Errorf("commit %s: %w", Short(h.String()), err)
	}
	w.flags[h] = flag | flagQueued
	if flag&flagUninteresting == 0 {
		w.queue.interesting++
	}
	heap.Push(&w.queue, c)
	return nil
}

// markUninteresting marks h and its already-seen ancestors uninteresting.
func (w *walker) markUninteresting(h plumbing.Hash) {
	stack := []plumbing.Hash{h}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		f, seen := w.flags[h]
		if !seen {
			// Reached only through this commit so far: queue it as
			// uninteresting so the mark keeps spreading.
			_ = w.push(h, flagUninteresting)
			continue
		}
		if f&flagUninteresting != 0 {
			continue
		}
		w.flags[h] = f | flagUninteresting
		if w.queue.remove(h) {
			// Still queued: it now counts as uninteresting and its
			// parents get the mark when it is popped.
			w.queue.interesting--
			c, err := w.repo.CommitObject(h)
			if err == nil {
				heap.Push(&w.queue, c)
			}
			continue
		}
		c, err := w.repo.CommitObject(h)
		if err != nil {
			continue
		}
		stack = append(stack, w.parents(c)...)
	}
}

// commitQueue is a max-heap of commits by committer date.
type commitQueue struct {
	items       []*object.Commit
	interesting int // queued commits not marked uninteresting
}

func (q commitQueue) Len() int { return len(q.items) }
func (q commitQueue) Less(i, j int) bool {
	return q.items[i].Committer.When.After(q.items[j].Committer.When)
}
func (q commitQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *commitQueue) Push(x any)   { q.items = append(q.items, x.(*object.Commit)) }
func (q *commitQueue) Pop() any {
	n := len(q.items)
	c := q.items[n-1]
	q.items = q.items[:n-1]
	return c
}
func (q *commitQueue) newest() time.Time { return q.items[0].Committer.When }

func (q *commitQueue) remove(h plumbing.Hash) bool {
	for i, c := range q.items {
		if c.Hash == h {
			heap.Remove(q, i)
			return true
		}
	}
	return false
}

// Range lists the commits reachable from bad and not from good (git's
// good..bad), oldest first: parents before children, older committer date
// first among unrelated commits, so bad comes last. With firstParent only
// bad's first-parent chain is listed, as git rev-list --first-parent does
// (merged branches then count as their merge commit).
func (r *Repo) Range(good, bad string, firstParent bool) ([]Commit, error) {
	g, err := r.Resolve(good)
	if err != nil {
		return nil, fmt.Errorf("good revision: %w", err)
	}
	b, err := r.Resolve(bad)
	if err != nil {
		return nil, fmt.Errorf("bad revision: %w", err)
	}
	shallow := r.shallowCommits()
	w := newWalker(r.repo, shallow)
	var found []*object.Commit
	err = w.walk([]plumbing.Hash{plumbing.NewHash(b.Hash)}, []plumbing.Hash{plumbing.NewHash(g.Hash)}, firstParent,
		func(c *object.Commit, interesting bool) (bool, error) {
			if interesting {
				found = append(found, c)
			}
			return true, nil
		})
	if err != nil {
		return nil, fmt.Errorf("listing %s..%s: %w", g.Short(), b.Short(), err)
	}
	// A commit may have been marked uninteresting after it was visited
	// (clock skew); drop those.
	in := map[plumbing.Hash]*object.Commit{}
	for _, c := range found {
		if w.flags[c.Hash]&flagUninteresting == 0 {
			in[c.Hash] = c
		}
	}
	return topoOldestFirst(in, firstParent, shallow), nil
}

// topoOldestFirst orders commits so that every parent comes before its
// children, taking the oldest ready commit first.
func topoOldestFirst(in map[plumbing.Hash]*object.Commit, firstParent bool, shallow map[plumbing.Hash]bool) []Commit {
	children := map[plumbing.Hash][]plumbing.Hash{}
	pending := map[plumbing.Hash]int{}
	for h, c := range in {
		parents := c.ParentHashes
		if firstParent && len(parents) > 1 {
			parents = parents[:1]
		}
		for _, p := range parents {
			if _, ok := in[p]; ok {
				children[p] = append(children[p], h)
				pending[h]++
			}
		}
	}
	var ready []*object.Commit
	for h, c := range in {
		if pending[h] == 0 {
			ready = append(ready, c)
		}
	}
	out := make([]Commit, 0, len(in))
	for len(ready) > 0 {
		sort.Slice(ready, func(i, j int) bool {
			a, b := ready[i].Committer.When, ready[j].Committer.When
			if !a.Equal(b) {
				return a.After(b) // oldest at the end, popped first
			}
			return ready[i].Hash.String() > ready[j].Hash.String()
		})
		c := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		out = append(out, toCommit(c, shallow))
		for _, ch := range children[c.Hash] {
			pending[ch]--
			if pending[ch] == 0 {
				ready = append(ready, in[ch])
			}
		}
	}
	return out
}
