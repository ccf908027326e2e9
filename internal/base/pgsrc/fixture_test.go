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
