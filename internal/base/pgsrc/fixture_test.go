package pgsrc_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
)

// TestSharedRepo imports the real PostgreSQL 15 tarball (once per test
// state directory) and checks that copies made with NewRepo start from the
// same commit and take commits independently.
func TestSharedRepo(t *testing.T) {
	shared, base := pgsrctest.Require(t)
	repo, err := git.PlainOpen(shared)
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.CommitObject(plumbing.NewHash(base))
	if err != nil {
		t.Fatal(err)
	}
	tree, _ := c.Tree()
	for _, p := range []string{"configure", "src/backend/commands/copyfrom.c", "src/include/pg_config.h.in", "doc/src/sgml/ref/copy.sgml"} {
		if _, err := tree.File(p); err != nil {
			t.Errorf("fixture lacks %s: %v", p, err)
		}
	}
	edit := map[string]func(string) (string, error){
		"src/backend/commands/copyfrom.c": func(old string) (string, error) { return old + "/* edited */\n", nil },
	}
	var heads []string
	for i := 0; i < 2; i++ {
		dir := filepath.Join(t.TempDir(), "pg.git")
		b, err := pgsrc.NewRepo(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if b != base {
			t.Errorf("NewRepo base %s, want %s", b, base)
		}
		h, err := pgsrc.Commit(dir, "edit copyfrom.c", pgsrc.BaseDate.Add(time.Hour), edit)
		if err != nil {
			t.Fatal(err)
		}
		heads = append(heads, h)
	}
	if heads[0] != heads[1] {
		t.Errorf("the same edit gave %s and %s", heads[0], heads[1])
	}
	// The shared repository did not move.
	ref, _ := repo.Reference("refs/heads/master", true)
	if ref.Hash().String() != base {
		t.Errorf("shared master moved to %s", ref.Hash())
	}
}

// TestNewReleasesRepo makes a repository of the 15 and 18 fixtures: each
// release's tag names its fixture's own base commit (so its build is the
// shared one), and each commit's tree is that release's.
func TestNewReleasesRepo(t *testing.T) {
	_, base15 := pgsrctest.RequireMajor(t, 15)
	_, base18 := pgsrctest.RequireMajor(t, 18)
	dir := filepath.Join(t.TempDir(), "releases.git")
	tags, err := pgsrc.NewReleasesRepo(context.Background(), dir, 15, 18)
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 2 || tags[0] != "REL_15_18" || tags[1] != "REL_18_6" {
		t.Fatalf("tags %v, want [REL_15_18 REL_18_6]", tags)
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	for tag, want := range map[string]string{"REL_15_18": base15, "REL_18_6": base18, "master": base18} {
		h, err := repo.ResolveRevision(plumbing.Revision(tag))
		if err != nil || h.String() != want {
			t.Errorf("%s = %v (%v), want %s", tag, h, err, want)
			continue
		}
		c, err := repo.CommitObject(*h)
		if err != nil {
			t.Fatal(err)
		}
		tree, _ := c.Tree()
		_, mesonErr := tree.File("meson.build")
		if (tag == "REL_15_18") != (mesonErr != nil) {
			t.Errorf("%s: meson.build present %v; 15 has none, 18 has one", tag, mesonErr == nil)
		}
	}
}

// TestNewReleasesHistory makes a history of 15.18 then 18.6: the first
// commit is 15's fixture commit, the second has 18's tree with the first as
// parent, and the tags and master name them.
func TestNewReleasesHistory(t *testing.T) {
	_, base15 := pgsrctest.RequireMajor(t, 15)
	_, base18 := pgsrctest.RequireMajor(t, 18)
	dir := filepath.Join(t.TempDir(), "history.git")
	commits, tags, err := pgsrc.NewReleasesHistory(context.Background(), dir, 15, 18)
	if err != nil {
		t.Fatal(err)
	}
	if len(commits) != 2 || commits[0] != base15 || commits[1] == base18 || tags[1] != "REL_18_6" {
		t.Fatalf("commits %v tags %v; want 15's fixture commit first and a new commit for 18", commits, tags)
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.CommitObject(plumbing.NewHash(commits[1]))
	if err != nil {
		t.Fatal(err)
	}
	r18, _ := repo.CommitObject(plumbing.NewHash(base18))
	if c.TreeHash != r18.TreeHash || len(c.ParentHashes) != 1 || c.ParentHashes[0].String() != commits[0] {
		t.Errorf("18's commit: tree %s (want %s), parents %v (want %s)", c.TreeHash, r18.TreeHash, c.ParentHashes, commits[0])
	}
	for rev, want := range map[string]string{"master": commits[1], "REL_18_6": commits[1], "REL_15_18": commits[0]} {
		if h, err := repo.ResolveRevision(plumbing.Revision(rev)); err != nil || h.String() != want {
			t.Errorf("%s = %v (%v), want %s", rev, h, err, want)
		}
	}
}
