package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"
)

// revertHistory is a PostgreSQL 15 history for revert checks: the base,
// the demo's injected COPY regression, and a commit that adds a comment
// block at the top of the same file, so that every line under the
// culprit's hunk moves and reverting it needs git apply's offset search.
type revertHistory struct {
	dir, base, culprit, shift string
	undo                      string // the mbox of a patch that undoes the culprit (base64 attachment)
}

const revertPath = "src/backend/commands/copyfromparse.c"

func newRevertHistory(t *testing.T) revertHistory {
	t.Helper()
	ctx := context.Background()
	work := t.TempDir()
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	h := revertHistory{dir: filepath.Join(work, "revert.git")}
	var err error
	if h.base, err = pgsrc.NewRepo(ctx, h.dir); err != nil {
		pgsrctest.Unavailable(t, err)
	}
	regress := demoStep{"copy-regression", revertPath, ""}
	h.culprit, err = pgsrc.Commit(h.dir, "INJECTED REGRESSION (pgbisect test): extra per-row work in NextCopyFrom", pgsrc.BaseDate.Add(time.Hour),
		map[string]func(string) (string, error){revertPath: regress.edit(1)})
	if err != nil {
		t.Fatal(err)
	}
	h.shift, err = pgsrc.Commit(h.dir, "copyfromparse.c: a comment block at the top (pgbisect test: moves every line below it)", pgsrc.BaseDate.Add(2*time.Hour),
		map[string]func(string) (string, error){revertPath: func(old string) (string, error) {
			return "/*\n * pgbisect test: these lines move everything below them,\n * so a revert of an older commit must find its hunks at an offset.\n */\n" + old, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	// The undoing patch is what git diff CULPRIT BASE prints, sent as a
	// base64 attachment, the way mail clients send patches.
	repo, err := build.Open(ctx, h.dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	from, _ := repo.Git().CommitObject(plumbing.NewHash(h.culprit))
	to, _ := repo.Git().CommitObject(plumbing.NewHash(h.base))
	diff, err := from.Patch(to)
	if err != nil {
		t.Fatal(err)
	}
	h.undo = "From: Someone <someone@example.org>\nSubject: [PATCH] Remove the per-row work from NextCopyFrom\n" +
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/plain\n\nUndo it.\n" +
		"--b\nContent-Type: text/x-patch; name=\"undo.patch\"\nContent-Disposition: attachment; filename=\"undo.patch\"\n" +
		"Content-Transfer-Encoding: base64\n\n" + base64.StdEncoding.EncodeToString([]byte(diff.String())) + "\n--b--\n"
	return h
}

// TestRevertOnFixture reverts the culprit on top of the later commit in the
// real PostgreSQL tree, without building: the hunk is found 4 lines down
// and the result is the later commit without the regression. The undoing
// patch, from an mbox, makes the same synthetic commit (one build for
// both); applied to the base, where there is nothing to undo, it fails
// naming the file and the hunk.
func TestRevertOnFixture(t *testing.T) {
	pgsrctest.Require(t)
	h := newRevertHistory(t)
	repo, err := build.Open(context.Background(), h.dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.Revert(h.shift, h.culprit)
	if err != nil {
		t.Fatal(err)
	}
	got := readBlob(t, repo, c.Hash, revertPath)
	shifted := readBlob(t, repo, h.shift, revertPath)
	if strings.Contains(got, "INJECTED REGRESSION") || !strings.HasPrefix(got, "/*\n * pgbisect test: these lines move") ||
		got != strings.Replace(shifted, pgsrc.DemoCopyInjected, "", 1) {
		t.Errorf("the revert on top of the shifted file is not the shifted file without the injected lines")
	}
	path := filepath.Join(t.TempDir(), "undo.mbox")
	if err := os.WriteFile(path, []byte(h.undo), 0o644); err != nil {
		t.Fatal(err)
	}
	patches, err := build.ReadPatchFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := repo.ApplyPatches(h.shift, patches)
	if err != nil {
		t.Fatal(err)
	}
	if p.Hash != c.Hash {
		t.Errorf("the undoing patch made %s, the revert %s: the same tree on the same base must be one commit", p.Short(), c.Short())
	}
	_, err = repo.ApplyPatches(h.base, patches)
	if err == nil || !strings.Contains(err.Error(), "undo.mbox, attachment undo.patch does not apply: "+revertPath+": hunk 1 of 1 (@@ ") {
		t.Errorf("applying the undoing patch where there is nothing to undo: %v", err)
	} else {
		t.Logf("the error: %v", err)
	}
}

func readBlob(t *testing.T, repo *build.Repo, commit, path string) string {
	t.Helper()
	c, err := repo.Git().CommitObject(plumbing.NewHash(commit))
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.File(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Contents()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRevertCheckAndPatchEndToEnd checks that compare --patch with a patch
// undoing the injected regression (from an mbox, as a base64 attachment)
// builds BASE+patch, the same commit as the revert of the culprit on top
// of BASE (so a revert check's build is the patch's, from the cache), and
// calls it an improvement; a patch that does not apply is an error naming
// the file and the hunk, before anything is built. The revert check after
// a bisection is tested on real code by TestRealHistoryNamesCopyCulprit
// (it replaced this test's synthetic bisection).
func TestRevertCheckAndPatchEndToEnd(t *testing.T) {
	state := pgsrctest.EndToEnd(t)
	h := newRevertHistory(t)
	ctx := context.Background()
	repo, err := build.Open(ctx, h.dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	reverted, err := repo.Revert(h.shift, h.culprit)
	if err != nil {
		t.Fatal(err)
	}

	// compare --patch: the same tree as the revert.
	mbox := filepath.Join(t.TempDir(), "undo.mbox")
	if err := os.WriteFile(mbox, []byte(h.undo), 0o644); err != nil {
		t.Fatal(err)
	}
	code, res, out := compareMain(t, "-s", runScenario, "--state", state, "--repo", h.dir,
		"--set", "rows=100000", "--point", "", "--min-effect", "0.05", "--max-samples", "20", "--json", h.shift, "--patch", mbox)
	if code != 0 {
		t.Fatalf("compare --patch exited %d:\n%s", code, out)
	}
	if res.B != short(h.shift)+"+patch" || len(res.Patches) != 1 || !strings.Contains(out, "the patched tree is commit "+reverted.Short()) {
		t.Errorf("compare --patch: A %s, B %s, patches %v; want B the patched %s, the revert's commit:\n%s", res.A, res.B, res.Patches, reverted.Short(), proctest.LastLines(out, 20))
	}
	for _, m := range res.Points[0].Metrics {
		if m.Name == "copy_time" {
			c := m.Comparison
			t.Logf("compare --patch: copy_time %.3f [%.3f, %.3f], p %.4f, n %d+%d", c.Ratio, c.Lo, c.Hi, c.P, c.A.N, c.B.N)
			if c.Verdict != stats.Improvement {
				t.Errorf("compare --patch: copy_time %s, want improvement", c.Verdict)
			}
		}
	}
	// Where there is nothing to undo, the patch does not apply: an error
	// before anything is built.
	code, _, out = compareMain(t, "-s", runScenario, "--state", state, "--repo", h.dir, h.base, "--patch", mbox)
	if code == 0 || !strings.Contains(out, "does not apply: "+revertPath+": hunk 1 of 1") {
		t.Errorf("compare --patch on a base without the regression: exit %d:\n%s", code, out)
	}
}

// TestRevertChecksNotApplied covers the checks that are reported without
// building anything: a culprit whose revert conflicts on top of the bad
// commit and of every commit after it (its child rewrote its lines, so
// there is no commit to revert it on instead), which makes the check of
// all culprits impossible too, and a culprit that is a range. They are
// saved, so a resumed bisection reports the same.
func TestRevertChecksNotApplied(t *testing.T) {
	pgsrctest.Require(t)
	h := newRevertHistory(t)
	// The rewrite is the culprit's child: the branch goes back to it.
	g, err := git.PlainOpen(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName(pgsrc.Branch), plumbing.NewHash(h.culprit))); err != nil {
		t.Fatal(err)
	}
	rewrite, err := pgsrc.Commit(h.dir, "copyfromparse.c: rewrite the injected block", pgsrc.BaseDate.Add(3*time.Hour),
		map[string]func(string) (string, error){revertPath: func(old string) (string, error) {
			return strings.Replace(old, "pgbisect_i < 1000", "pgbisect_i < 10", 1), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	repo, err := build.Open(context.Background(), h.dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := func(hash string) finding.Commit { return finding.Commit{Hash: hash} }
	f := &finding.Finding{Kind: finding.Regression, Metric: "copy_time", Good: c(h.base), Bad: c(rewrite),
		Culprits: []finding.Culprit{
			{Commit: c(h.culprit), Parent: c(h.base)},
			{Commit: c(h.shift), Parent: c(h.culprit), Range: []finding.Commit{c(h.culprit), c(h.shift)}},
		}}
	state := t.TempDir()
	sink := func(app.Event) {}
	in := app.RevertInputs{Repo: repo, StateDir: state, ID: "test"}
	checks := app.RevertChecks(context.Background(), sink, in, f)
	if len(checks) != 3 {
		t.Fatalf("%d checks: %+v", len(checks), checks)
	}
	if s := checks[0].Skipped; checks[0].Build != "" || checks[0].Base != nil || !strings.Contains(s, "the revert does not apply: patch revert of "+short(h.culprit)+
		" does not apply: "+revertPath+": a later commit changed the lines this commit changed") || !strings.Contains(s, "it conflicts already on top of "+short(rewrite)) {
		t.Errorf("the culprit whose lines were rewritten: %+v", checks[0])
	}
	if s := checks[1].Skipped; !strings.Contains(s, "one of a range of 2 candidates") {
		t.Errorf("the range: %q", s)
	}
	if !checks[2].All || !strings.Contains(checks[2].Skipped, "the revert of "+short(h.culprit)+" does not apply") {
		t.Errorf("all culprits: %+v", checks[2])
	}
	f.Reverts = checks
	var out bytes.Buffer
	revertPrint(&out, f)
	if !strings.Contains(out.String(), "revert check: reverting all culprits on top of "+short(rewrite)+": not checked") {
		t.Errorf("summary:\n%s", out.String())
	}
	// Saved: a second call returns them without looking at the repository.
	again := app.RevertChecks(context.Background(), sink, app.RevertInputs{StateDir: state, ID: "test"}, f)
	if len(again) != 3 || again[0].Skipped != checks[0].Skipped {
		t.Errorf("saved checks not reused: %+v", again)
	}
	if got := app.RevertChecks(context.Background(), sink, app.RevertInputs{StateDir: state, ID: "other", Skip: true}, f); got != nil {
		t.Errorf("--no-revert-check made checks: %+v", got)
	}
}
