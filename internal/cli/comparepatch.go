package cli

// compare --patch (issue 16): the wiring only; build reads and applies the
// patches (build.ReadPatchFile, build.Repo.ApplyPatches).

import (
	"context"
	"fmt"
	"strings"

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/config"
)

// comparePatched applies the patch files in order on top of base and
// returns the two revisions to compare, base and the synthetic commit of
// the patched tree, with a name for the patched side ("1a2b3c4d5e+patch").
func comparePatched(ctx context.Context, env *Env, cfg *config.Config, base string, files []string) (revs []string, name string, err error) {
	repo, err := build.Open(ctx, cfg.Repo, cfg.StateDir, env.Stderr)
	if err != nil {
		return nil, "", err
	}
	bc, err := repo.Resolve(base)
	if err != nil {
		return nil, "", err
	}
	var patches []build.Patch
	for _, f := range files {
		ps, err := build.ReadPatchFile(f)
		if err != nil {
			return nil, "", err
		}
		patches = append(patches, ps...)
	}
	c, err := repo.ApplyPatches(bc.Hash, patches)
	if err != nil {
		return nil, "", err
	}
	var what []string
	for _, p := range patches {
		s := p.Name
		if p.Subject != "" {
			s += " (" + p.Subject + ")"
		}
		what = append(what, s)
	}
	fmt.Fprintf(env.Stderr, "patched %s %s with %d patch(es): %s\n  the patched tree is commit %s (under %s), built like any commit\n",
		bc.Short(), bc.Subject, len(patches), strings.Join(what, "; "), c.Short(), build.PatchedRefPrefix)
	return []string{bc.Hash, c.Hash}, bc.Short() + "+patch", nil
}
