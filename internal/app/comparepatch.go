package app

// compare --patch (issue 16): the wiring only; build reads and applies the
// patches (build.ReadPatchFile, build.Repo.ApplyPatches).

import (
	"context"
	"strings"

	"github.com/pgbisect/pgbisect/build"
)

// comparePatched applies the patch files, then the patches carried in the
// request, in order on top of base and returns the two revisions to
// compare, base and the synthetic commit of the patched tree, with a name
// for the patched side ("1a2b3c4d5e+patch").
func (a *App) comparePatched(ctx context.Context, base string, files []string, data []PatchData, sink Sink) (revs []string, name string, err error) {
	_, repo, err := a.Builder(ctx, sink)
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
	for _, d := range data {
		if len(d.Data) > build.MaxPatchBytes {
			return nil, "", badRequest("patch %s is larger than %d MiB: give a smaller patch", d.Name, build.MaxPatchBytes>>20)
		}
		ps, err := build.ParsePatches(d.Name, d.Data)
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
	sink.note("patched %s %s with %d patch(es): %s\n  the patched tree is commit %s (under %s), built like any commit",
		bc.Short(), bc.Subject, len(patches), strings.Join(what, "; "), c.Short(), build.PatchedRefPrefix)
	return []string{bc.Hash, c.Hash}, bc.Short() + "+patch", nil
}
