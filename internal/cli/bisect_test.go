package cli

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
	"github.com/pgbisect/pgbisect/internal/config"
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
	if err := wt.Checkout(&git.CheckoutOptions{Hash: plumbingHash(c1), Branch: "refs/heads/side", Create: true}); err != nil {
		t.Fatal(err)
	}
	s1 = commit("s.c", "int s;\n")
	return dir, c1, c2, c3, s1
}

// TestBisectChecksInputFirst checks that mistakes are reported before any
// build starts, with what to do about them.
func TestBisectChecksInputFirst(t *testing.T) {
	repo, c1, _, c3, _ := bisectTestRepo(t)
	state := t.TempDir()
	single := "../../configs/scenarios/copy-single.yaml"
	multi := "../../configs/scenarios/copy-concurrent.yaml"
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing revisions", []string{"-s", single}, 2, "give -s SCENARIO, --good REV and --bad REV"},
		{"positional", []string{"-s", single, "--good", c1, "--bad", c3, "extra"}, 2, "unexpected argument"},
		{"swapped", []string{"-s", single, "--good", c3, "--bad", c1}, 2, "swap --good and --bad"},
		{"same", []string{"-s", single, "--good", c3, "--bad", c3}, 2, "same commit"},
		{"unknown revision", []string{"-s", single, "--good", "nosuchrev", "--bad", c3}, 1, "good revision"},
		{"unknown metric", []string{"-s", single, "--good", c1, "--bad", c3, "--metric", "copy_tme"}, 2, `did you mean "copy_time"`},
		{"several points", []string{"-s", multi, "--good", c1, "--bad", c3}, 2, "choose one with --point"},
		{"bad point", []string{"-s", multi, "--good", c1, "--bad", c3, "--point", "clients=3"}, 2, "clients=3"},
		{"bad scenario", []string{"-s", "nosuch.yaml", "--good", c1, "--bad", c3}, 1, "nosuch.yaml"},
		{"min effect", []string{"-s", single, "--good", c1, "--bad", c3, "--min-effect", "5"}, 2, "fraction"},
		{"profile runs", []string{"-s", single, "--good", c1, "--bad", c3, "--profile-runs", "-1"}, 2, "--profile-runs -1"},
		{"unknown resume", []string{"--resume", "0123456789ab"}, 1, "no such bisection"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"bisect", "--state", state, "--repo", repo}, tt.args...)
			code := Main(context.Background(), args, &out, &errb)
			if code != tt.code || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errb.String(), tt.code, tt.want)
			}
		})
	}
	if entries, _ := os.ReadDir(filepath.Join(state, "builds")); len(entries) > 0 {
		t.Errorf("a build was started although every input was wrong")
	}
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
	env := &Env{Stdout: &out, Stderr: &out}
	cfg := &config.Config{Repo: dir, Branch: "master"}
	good, bad, given, err := bisectResolve(context.Background(), env, cfg, repo, "side", "master")
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
	if good, _, given, err := bisectResolve(context.Background(), env, cfg, repo, c1, "master"); err != nil || good.Hash != c1 || given != "" || out.Len() > 0 {
		t.Errorf("ancestor good: %s, given %q, %v, output %q", good.Short(), given, err, out.String())
	}
}

func plumbingHash(s string) plumbing.Hash { return plumbing.NewHash(s) }
