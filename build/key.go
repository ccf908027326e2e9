package build

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
)

// Key identifies a build: the tree that is compiled and the options.
type Key struct {
	// ID names the cache entry: "<source hash>-<options hash>".
	ID string
	// Source is the full hash of the commit whose tree is built. It is the
	// commit asked for, or, when that commit and its first-parent
	// ancestors change only NoCompile paths, the nearest ancestor that
	// changes something compiled.
	Source string
	// SameAsParent is true when Source is not the commit asked for: the
	// commit cannot change the server, so it can never be a culprit.
	SameAsParent bool
}

// keyFor computes a commit's key under opts. It walks first parents while
// the commit changes only NoCompile paths; the answers are memoized. The
// options hashed are those of the source tree (Options.ForTree), so a
// tree that needs compatibility flags or meson has a key of its own.
func keyFor(ctx context.Context, r *Repo, hash string, opts Options, memo map[string]string) (Key, error) {
	k, err := sourceFor(ctx, r, hash, opts, memo)
	if err != nil {
		return Key{}, err
	}
	// memo also holds the options hash of each source tree, under a key
	// that cannot be a commit hash.
	h, ok := memo["options "+k.Source]
	if !ok {
		t, err := readTree(r, k.Source)
		if err != nil {
			return Key{}, err
		}
		h = opts.ForTree(t).Hash()
		memo["options "+k.Source] = h
	}
	k.ID = k.Source + "-" + h
	return k, nil
}

// sourceFor finds the source commit of hash's key; its ID is left empty.
func sourceFor(ctx context.Context, r *Repo, hash string, opts Options, memo map[string]string) (Key, error) {
	c, err := r.Resolve(hash)
	if err != nil {
		return Key{}, err
	}
	noCompile := opts.noCompile()
	cur := c
	var walked []string
	for {
		if err := ctx.Err(); err != nil {
			return Key{}, err
		}
		if src, ok := memo[cur.Hash]; ok {
			return finishKey(c.Hash, src, memo, walked), nil
		}
		if len(cur.Parents) == 0 {
			break
		}
		paths, err := r.changedPaths(plumbing.NewHash(cur.Hash))
		if err != nil {
			return Key{}, fmt.Errorf("build key of %s: %w", c.Short(), err)
		}
		if changesCompiled(paths, noCompile) {
			ignored, err := configureIgnores(r, cur.Hash, paths, noCompile, opts)
			if err != nil {
				return Key{}, fmt.Errorf("build key of %s: %w", c.Short(), err)
			}
			if !ignored {
				break
			}
		}
		walked = append(walked, cur.Hash)
		if cur, err = r.Commit(cur.Parents[0]); err != nil {
			return Key{}, fmt.Errorf("build key of %s: %w", c.Short(), err)
		}
	}
	walked = append(walked, cur.Hash)
	return finishKey(c.Hash, cur.Hash, memo, walked), nil
}

func finishKey(hash, source string, memo map[string]string, walked []string) Key {
	for _, h := range walked {
		memo[h] = source
	}
	return Key{Source: source, SameAsParent: source != hash}
}

// configureIgnores reports whether a commit whose compiled changes are
// paths changes only files a configure build under opts never reads
// (measuredIgnores: meson's files, and the sources of programs it does not
// make) in a tree built with configure, so that its install is its
// parent's. The commit cannot have added or removed the configure script
// (that path would be among the changes), so its parent builds with
// configure too.
func configureIgnores(r *Repo, hash string, paths, noCompile []string, opts Options) (bool, error) {
	if opts.Meson {
		return false, nil
	}
	for _, p := range paths {
		if compiled(p, noCompile) && !measuredIgnores(p, opts) {
			return false, nil
		}
	}
	t, err := readTree(r, hash)
	if err != nil {
		return false, err
	}
	return !opts.ForTree(t).Meson, nil
}

func changesCompiled(paths []string, noCompile []string) bool {
	for _, p := range paths {
		if compiled(p, noCompile) {
			return true
		}
	}
	return false
}
