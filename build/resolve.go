package build

import (
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// minShortHash is the shortest hash prefix Resolve accepts, as git does.
const minShortHash = 4

// Resolve turns a revision into a commit. It accepts a full or abbreviated
// hash (at least 4 hex digits; an abbreviation matching several commits is
// an error naming them), a tag, a branch, "origin/branch", HEAD, any full
// ref name, each optionally followed by ~N, ^N, ~ or ^ suffixes
// ("master~3", "REL_15_0^2~1"). Names win over hash prefixes, except that
// a full 40-digit hash is always a hash.
func (r *Repo) Resolve(rev string) (Commit, error) {
	c, err := r.resolve(rev)
	if err != nil {
		return Commit{}, err
	}
	return toCommit(c, r.shallowCommits()), nil
}

func (r *Repo) resolve(rev string) (*object.Commit, error) {
	rev = strings.TrimSpace(rev)
	if rev == "" {
		return nil, errors.New("empty revision: give a commit hash, tag or branch")
	}
	base, suffix := splitSuffix(rev)
	c, err := r.resolveBase(base)
	if err != nil {
		return nil, err
	}
	for suffix != "" {
		op := suffix[0]
		suffix = suffix[1:]
		n := 1
		digits := 0
		for digits < len(suffix) && suffix[digits] >= '0' && suffix[digits] <= '9' {
			digits++
		}
		if digits > 0 {
			n, err = strconv.Atoi(suffix[:digits])
			if err != nil {
				return nil, fmt.Errorf("revision %q: bad number %q", rev, suffix[:digits])
			}
			suffix = suffix[digits:]
		}
		switch op {
		case '~':
			for i := 0; i < n; i++ {
				if c.NumParents() == 0 {
					return nil, fmt.Errorf("revision %q: %s has no parent (history has fewer than %d generations there)", rev, Short(c.Hash.String()), n)
				}
				if c, err = c.Parent(0); err != nil {
					return nil, fmt.Errorf("revision %q: %w", rev, err)
				}
			}
		case '^':
			if n == 0 {
				continue
			}
			if n > c.NumParents() {
				return nil, fmt.Errorf("revision %q: %s has %d parent(s), not %d", rev, Short(c.Hash.String()), c.NumParents(), n)
			}
			if c, err = c.Parent(n - 1); err != nil {
				return nil, fmt.Errorf("revision %q: %w", rev, err)
			}
		}
	}
	return c, nil
}

// splitSuffix splits "master~3^2" into "master" and "~3^2".
func splitSuffix(rev string) (base, suffix string) {
	i := len(rev)
	for i > 0 {
		j := i
		for j > 0 && rev[j-1] >= '0' && rev[j-1] <= '9' {
			j--
		}
		if j > 0 && (rev[j-1] == '~' || rev[j-1] == '^') {
			i = j - 1
			continue
		}
		break
	}
	return rev[:i], rev[i:]
}

func (r *Repo) resolveBase(name string) (*object.Commit, error) {
	if plumbing.IsHash(name) {
		c, err := r.peel(plumbing.NewHash(name))
		if err != nil {
			return nil, fmt.Errorf("revision %s: no such commit in %s: %w", name, r.dir, err)
		}
		return c, nil
	}
	for _, rule := range plumbing.RefRevParseRules {
		ref, err := storer.ResolveReference(r.repo.Storer, plumbing.ReferenceName(fmt.Sprintf(rule, name)))
		if err != nil {
			continue
		}
		c, err := r.peel(ref.Hash())
		if err != nil {
			return nil, fmt.Errorf("revision %s (%s): %w", name, ref.Name(), err)
		}
		return c, nil
	}
	if isHex(name) && len(name) >= minShortHash {
		return r.resolvePrefix(name)
	}
	hint := ""
	if isHex(name) {
		hint = fmt.Sprintf("; a hash needs at least %d hex digits", minShortHash)
	} else if r.remote != "" {
		hint = "; if it is new, fetch first"
	}
	return nil, fmt.Errorf("unknown revision %q in %s: not a commit hash, tag or branch%s", name, r.dir, hint)
}

// peel follows annotated tags to the commit they name.
func (r *Repo) peel(h plumbing.Hash) (*object.Commit, error) {
	for range 10 {
		obj, err := r.repo.Object(plumbing.AnyObject, h)
		if err != nil {
			return nil, err
		}
		switch o := obj.(type) {
		case *object.Commit:
			return o, nil
		case *object.Tag:
			h = o.Target
		default:
			return nil, fmt.Errorf("%s is a %s, not a commit", Short(h.String()), obj.Type())
		}
	}
	return nil, fmt.Errorf("%s: tag chain too long", Short(h.String()))
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return s != ""
}

// resolvePrefix finds the one commit whose hash starts with prefix, using
// the pack indexes rather than a walk of every object.
func (r *Repo) resolvePrefix(prefix string) (*object.Commit, error) {
	prefix = strings.ToLower(prefix)
	even := prefix[:len(prefix)/2*2]
	raw, err := hex.DecodeString(even)
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", prefix, err)
	}
	type prefixer interface {
		HashesWithPrefix(prefix []byte) ([]plumbing.Hash, error)
	}
	var hashes []plumbing.Hash
	if p, ok := r.repo.Storer.(prefixer); ok {
		if hashes, err = p.HashesWithPrefix(raw); err != nil {
			return nil, fmt.Errorf("revision %s: %w", prefix, err)
		}
	} else {
		iter, err := r.repo.Storer.IterEncodedObjects(plumbing.CommitObject)
		if err != nil {
			return nil, fmt.Errorf("revision %s: %w", prefix, err)
		}
		_ = iter.ForEach(func(o plumbing.EncodedObject) error {
			hashes = append(hashes, o.Hash())
			return nil
		})
	}
	var commits []*object.Commit
	seen := map[plumbing.Hash]bool{}
	for _, h := range hashes {
		if !strings.HasPrefix(h.String(), prefix) {
			continue
		}
		// Only commits and tags of commits count, as in git's
		// disambiguation for a commit-ish.
		c, err := r.peel(h)
		if err != nil || seen[c.Hash] {
			continue
		}
		seen[c.Hash] = true
		commits = append(commits, c)
	}
	switch len(commits) {
	case 0:
		return nil, fmt.Errorf("unknown revision %q in %s: no commit hash starts with it and no tag or branch has that name", prefix, r.dir)
	case 1:
		return commits[0], nil
	}
	sort.Slice(commits, func(i, j int) bool { return commits[i].Hash.String() < commits[j].Hash.String() })
	var b strings.Builder
	fmt.Fprintf(&b, "short hash %s is ambiguous: give more digits; candidates:", prefix)
	for _, c := range commits {
		subject, _, _ := strings.Cut(c.Message, "\n")
		fmt.Fprintf(&b, "\n  %s %s %s", Short(c.Hash.String()), c.Author.When.Format("2006-01-02"), subject)
	}
	return nil, errors.New(b.String())
}
