package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/pgbisect/pgbisect/internal/testkit/pghistory"
)

func TestMerge3(t *testing.T) {
	lines := func(s ...string) string { return strings.Join(s, "\n") + "\n" }
	anc := lines("a", "b", "c", "d", "e", "f", "g")
	tests := []struct {
		name         string
		anc          string // "" for the shared ancestor above
		ours, theirs string
		want         string // "" for a conflict
		at           string // the conflict's lines of ours
	}{
		{"only theirs changed", "", anc, lines("a", "B", "c", "d", "e", "f", "g"), lines("a", "B", "c", "d", "e", "f", "g"), ""},
		{"only ours changed", "", lines("a", "b", "c", "D", "e", "f", "g"), anc, lines("a", "b", "c", "D", "e", "f", "g"), ""},
		{"apart", "", lines("x", "a", "b", "c", "d", "e", "F", "g"), lines("a", "B", "c", "d", "e", "f", "g"),
			lines("x", "a", "B", "c", "d", "e", "F", "g"), ""},
		{"the same change on both", "", lines("a", "B", "c", "d", "e", "f", "g"), lines("a", "B", "c", "d", "e", "f", "g"),
			lines("a", "B", "c", "d", "e", "f", "g"), ""},
		{"theirs deletes, ours inserts far away", "", lines("a", "b", "c", "d", "e", "f", "g", "h"), lines("a", "d", "e", "f", "g"),
			lines("a", "d", "e", "f", "g", "h"), ""},
		{"both change one line", "", lines("a", "b", "C1", "d", "e", "f", "g"), lines("a", "b", "C2", "d", "e", "f", "g"), "", "3"},
		{"both insert at one place", "", lines("a", "b", "c", "x1", "x2", "d", "e", "f", "g"), lines("a", "b", "c", "y", "d", "e", "f", "g"), "", "4-5"},
		{"no final newline", "a\nb\nc", "a\nb\nc", "a\nB\nc", "a\nB\nc", ""},
	}
	for _, tt := range tests {
		a := anc
		if tt.anc != "" {
			a = tt.anc
		}
		got, at := merge3([]byte(a), []byte(tt.ours), []byte(tt.theirs))
		switch {
		case tt.want == "" && at == nil:
			t.Errorf("%s: merged %q, want a conflict at %s", tt.name, got, tt.at)
		case tt.want == "" && at.String() != tt.at:
			t.Errorf("%s: conflict at %s, want %s", tt.name, at, tt.at)
		case tt.want != "" && at != nil:
			t.Errorf("%s: conflict at %s, want %q", tt.name, at, tt.want)
		case tt.want != "" && string(got) != tt.want:
			t.Errorf("%s: merged %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestRevertRealHistory reverts the three commits the PG16 COPY thread
// blamed on top of the cycle's last master commit, each alone and all
// three together, in real upstream history (../shared/pg-history): later
// commits changed the lines around each culprit's, so the culprit's own
// reversed diff no longer applies there, and the three-way merge must
// make exactly the tree git revert makes.
func TestRevertRealHistory(t *testing.T) {
	bare := pghistory.Repo(t, pghistory.PG16)
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal(err)
	}
	const bad = "5bcc7e6dc8~1"
	culprits := []string{"9f8377f7a27", "faff8f8e47f", "6fcda9aba83"} // newest first, as git revert takes them
	repo, err := Open(context.Background(), bare, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "pg")
	gitIn := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org")
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := gitIn(filepath.Dir(work), "clone", "--quiet", "--no-checkout", bare, work); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	// git's tree for the revert of commits on top of bad, or the files
	// it conflicts in.
	gitRevert := func(bad string, commits ...string) (tree string, conflicts []string) {
		t.Helper()
		gitIn(work, "revert", "--abort")
		if out, err := gitIn(work, "reset", "--quiet", "--hard", bad); err != nil {
			t.Fatalf("git reset: %v\n%s", err, out)
		}
		if out, err := gitIn(work, append([]string{"revert", "--no-commit"}, commits...)...); err != nil {
			for _, l := range strings.Split(out, "\n") {
				if _, f, ok := strings.Cut(l, "Merge conflict in "); ok {
					conflicts = append(conflicts, f)
				}
			}
			if len(conflicts) == 0 {
				t.Fatalf("git revert %v: %v\n%s", commits, err, out)
			}
			return "", conflicts
		}
		out, err := gitIn(work, "write-tree")
		if err != nil {
			t.Fatalf("git write-tree: %v\n%s", err, out)
		}
		return out, nil
	}
	type revertCase struct {
		bad string
		cs  []string
	}
	cases := []revertCase{{bad, culprits[:1]}, {bad, culprits[1:2]}, {bad, culprits[2:]}, {bad, culprits},
		// 21 commits after 9f8377f7a27 (the last where git revert merges it
		// cleanly; the next, b85e91023b, conflicts in copyfromparse.c).
		{"483bdb2afe", culprits[:1]}}
	merged, strictFailed := 0, 0
	for _, rc := range cases {
		bad, cs := rc.bad, rc.cs
		want, conflicts := gitRevert(bad, cs...)
		// The strict reversed diff, as the revert check had it before:
		// real history is why it is not enough.
		var strict error
		if len(cs) == 1 {
			p, err := reversedDiff(repo, cs[0])
			if err != nil {
				t.Fatal(err)
			}
			_, strict = repo.ApplyPatches(bad, []Patch{p})
		}
		c, err := repo.Revert(bad, cs...)
		var ae *ApplyError
		if len(conflicts) > 0 {
			// Lines both changed: the revert must say where, as git does.
			if !errors.As(err, &ae) || !slices.Contains(conflicts, ae.File) {
				t.Errorf("Revert(%s, %v) = %v; git revert conflicts in %v", bad, cs, err, conflicts)
			}
			t.Logf("revert of %v on top of %s conflicts, as git's in %v: %v", cs, bad, conflicts, err)
			continue
		}
		if err != nil {
			t.Errorf("Revert(%s, %v): %v (git revert merges it)", bad, cs, err)
			continue
		}
		merged++
		got := treeHash(t, repo, c.Hash)
		if got != want {
			t.Errorf("Revert(%s, %v) made tree %s, git revert %s", bad, cs, Short(got), Short(want))
		}
		t.Logf("revert of %v on top of %s: tree %s, as git revert's (the reversed diff alone: %v)", cs, bad, Short(got), strict)
		if len(cs) == 1 && strict != nil {
			if !errors.As(strict, &ae) {
				t.Errorf("the reversed diff of %s: %v", cs[0], strict)
			}
			strictFailed++
		}
	}
	if merged == 0 {
		t.Errorf("git revert merged none of %v: the test compares no tree", cases)
	}
	t.Logf("%d reverts merged as git's, %d of them where the reversed diff alone does not apply", merged, strictFailed)

	// Where each conflicts on top of bad, RevertBase finds the latest
	// commit on the way where git revert merges it: the next one of the
	// chain conflicts for git too.
	for _, cs := range [][]string{culprits[:1], culprits[1:2], culprits[2:], culprits} {
		base, after, err := repo.RevertBase(bad, cs...)
		if len(cs) > 1 {
			// Commits between faff8f8e47f and 9f8377f7a27 changed
			// the older culprits' lines: all three conflict together
			// on top of the newest and after, for git too.
			next, rerr := repo.Range(cs[0], bad, true)
			if rerr != nil || len(next) == 0 {
				t.Fatalf("the commits after %s: %v", cs[0], rerr)
			}
			if _, conflicts := gitRevert(next[0].Hash, cs...); err == nil || len(conflicts) == 0 {
				t.Errorf("RevertBase(%s, %v) = %s, %v; git revert on top of %s conflicts in %v", bad, cs, base.Short(), err, next[0].Short(), conflicts)
			}
			t.Logf("revert of all of %v: %v", cs, err)
			continue
		}
		if err != nil {
			t.Errorf("RevertBase(%s, %v): %v", bad, cs, err)
			continue
		}
		want, conflicts := gitRevert(base.Hash, cs...)
		if len(conflicts) > 0 {
			t.Errorf("RevertBase(%s, %v) = %s, where git revert conflicts in %v", bad, cs, base.Short(), conflicts)
			continue
		}
		c, err := repo.Revert(base.Hash, cs...)
		if err != nil || treeHash(t, repo, c.Hash) != want {
			t.Errorf("Revert(%s, %v) = %v, %v; git revert makes tree %s", base.Short(), cs, c.Hash, err, Short(want))
		}
		chain, err := repo.Range(base.Hash, bad, true)
		if err != nil || len(chain) != after || after == 0 {
			t.Fatalf("%d commits after %s up to %s (%v), RevertBase said %d", len(chain), base.Short(), bad, err, after)
		}
		if _, conflicts := gitRevert(chain[0].Hash, cs...); len(conflicts) == 0 {
			t.Errorf("RevertBase(%s, %v) = %s, but git revert merges on its successor %s too", bad, cs, base.Short(), chain[0].Short())
		}
		t.Logf("revert of %v: on top of %s (%s), %d first-parent commits before %s", cs, base.Short(), base.Subject, after, bad)
	}
}

// reversedDiff is the culprit's diff against its parent, reversed: what the
// revert check applied before it merged.
func reversedDiff(repo *Repo, commit string) (Patch, error) {
	c, err := repo.resolve(commit)
	if err != nil {
		return Patch{}, err
	}
	p, err := c.Parent(0)
	if err != nil {
		return Patch{}, err
	}
	d, err := c.Patch(p)
	if err != nil {
		return Patch{}, err
	}
	ps, err := ParsePatches("reversed diff of "+Short(c.Hash.String()), []byte(d.String()))
	if err != nil || len(ps) != 1 {
		return Patch{}, err
	}
	return ps[0], nil
}

func treeHash(t *testing.T, repo *Repo, commit string) string {
	t.Helper()
	c, err := repo.resolve(commit)
	if err != nil {
		t.Fatal(err)
	}
	return c.TreeHash.String()
}

// TestKeyUnmeasuredRealHistory: real commits whose changes a configure
// build never reads build as their parent. 72740099 ("meson: fix openssl
// detection issues in 6a30027") changes only meson.build, which configure
// and make never read; before, it also re-ran configure, which then
// rebuilt everything. a563c24c95 ("Allow pg_dump to include/exclude child
// tables automatically") changes pg_dump, which pgbisect does not build
// (Options.All does). A meson build builds both.
func TestKeyUnmeasuredRealHistory(t *testing.T) {
	bare := pghistory.Repo(t, pghistory.PG16)
	repo, err := Open(context.Background(), bare, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		rev     string
		changes []string
		own     []Options // the options under which it has a build of its own
	}{
		{"72740099", []string{"meson.build"}, []Options{{All: true, Meson: true}, {Meson: true}}},
		{"a563c24c95", []string{"doc/src/sgml/ref/pg_dump.sgml", "src/bin/pg_dump/pg_dump.c", "src/bin/pg_dump/t/002_pg_dump.pl"},
			[]Options{{All: true}, {Meson: true}, {All: true, Meson: true}}},
	} {
		c, err := repo.Resolve(tc.rev)
		if err != nil {
			t.Fatal(err)
		}
		paths, err := repo.changedPaths(plumbing.NewHash(c.Hash))
		if err != nil || !slices.Equal(paths, tc.changes) {
			t.Fatalf("%s changes %q (%v), want %q", tc.rev, paths, err, tc.changes)
		}
		parent := c.Parents[0]
		for _, o := range []Options{{}, {All: true}, {Meson: true}, {All: true, Meson: true}, {Contrib: []string{"amcheck"}}} {
			source := parent
			for _, own := range tc.own {
				if fmt.Sprint(own) == fmt.Sprint(o) {
					source = c.Hash
				}
			}
			b := NewBuilder(repo, t.TempDir(), o, nil, nil)
			k, err := b.Key(ctx, c.Hash)
			if err != nil {
				t.Fatal(err)
			}
			if k.Source != source || k.SameAsParent != (source != c.Hash) {
				t.Errorf("%s with %s: key source %s (same as parent %v), want %s", tc.rev, o, Short(k.Source), k.SameAsParent, Short(source))
			}
			// configure's inputs are the same on both sides.
			if !o.Meson {
				h1, err1 := b.configHash(c.Hash, o)
				h2, err2 := b.configHash(parent, o)
				if err1 != nil || err2 != nil || h1 != h2 {
					t.Errorf("%s: configure hash %s (%v), %s (%v) at its parent: configure would re-run", tc.rev, h1, err1, h2, err2)
				}
			}
		}
	}
}
