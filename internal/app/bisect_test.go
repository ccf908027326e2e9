package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/pgbisect/pgbisect/build"
)

// bisectTestRepo makes a git repository of three commits on master and a
// side branch, and returns it with the hashes: c1 <- c2 <- c3 and c1 <- s1.
func bisectTestRepo(t *testing.T) (dir string, c1, c2, c3, s1 string) {
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

// TestBisectResolveMergeBase: a good commit on another branch (REL_15_0
// for bad REL_16_0) is replaced by the merge base of the two, with a line
// that says so, and the commit given is returned for the report.
func TestBisectResolveMergeBase(t *testing.T) {
	dir, c1, _, c3, s1 := bisectTestRepo(t)
	repo, err := build.Open(context.Background(), dir, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	a, err := Open(context.Background(), Options{Repo: dir, Branch: "master", StateDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := Sink(func(e Event) { out.WriteString(e.Text + "\n") })
	good, bad, given, err := a.bisectResolve(context.Background(), repo, "side", "master", sink)
	if err != nil {
		t.Fatal(err)
	}
	if good.Hash != c1 || bad.Hash != c3 || given != s1 {
		t.Errorf("good %s, bad %s, given %s; want the merge base %s, %s and the side branch's %s", good.Short(), bad.Short(), given, c1[:10], c3[:10], s1[:10])
	}
	if want := "bisecting from their merge base " + c1[:10]; !strings.Contains(out.String(), want) {
		t.Errorf("output %q lacks %q", out.String(), want)
	}
	// An ancestor is used as it is.
	out.Reset()
	if good, _, given, err := a.bisectResolve(context.Background(), repo, c1, "master", sink); err != nil || good.Hash != c1 || given != "" || out.Len() > 0 {
		t.Errorf("ancestor good: %s, given %q, %v, output %q", good.Short(), given, err, out.String())
	}
}
