// Package gittest makes small git repositories for tests: real ones,
// made with go-git, with fixed dates so their hashes never change.
package gittest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo makes a git repository of three commits on master and a
// side branch, and returns it with the hashes: c1 <- c2 <- c3 and c1 <- s1.
func Repo(t *testing.T) (dir string, c1, c2, c3, s1 string) {
	t.Helper()
	dir = t.TempDir()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	when := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	commit := func(name, content string) string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
		when = when.Add(time.Hour)
		sig := &object.Signature{Name: "t", Email: "t@example.org", When: when}
		h, err := wt.Commit("edit "+name, &git.CommitOptions{Author: sig, Committer: sig})
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	c1 = commit("a.c", "int a;\n")
	c2 = commit("a.c", "int a, b;\n")
	c3 = commit("b.c", "int c;\n")
	if err := wt.Checkout(&git.CheckoutOptions{Hash: plumbing.NewHash(c1), Branch: "refs/heads/side", Create: true}); err != nil {
		t.Fatal(err)
	}
	s1 = commit("s.c", "int s;\n")
	return dir, c1, c2, c3, s1
}
