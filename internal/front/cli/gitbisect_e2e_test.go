package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"
)

// TestGitBisectRunCompare drives 'git bisect run pgbisect compare
// --exit-code' for real, as docs/cli.md tells a PostgreSQL hacker to: in a
// work tree cloned from the demo history (the shared fixture's PostgreSQL
// 15 source with its injected edits, so builds are incremental), from
// three commits before the injected COPY FROM regression to three after
// it, git checks out each commit it picks and pgbisect compares the good
// commit with HEAD of the work tree (--repo .). git bisect must name the
// injected culprit as the first bad commit. The test binary plays pgbisect
// (cliChildEnv), so the code run is Main's.
//
// --min-effect 0.25 lets "same" be decided on copy_time's noise at 100,000
// rows (about 22% per sample here under load) within the budget; the
// injected regression is +90%. --alpha 0.001 keeps a chance "regression"
// on one of the neutral commits (three judged metrics each) rare.
func TestGitBisectRunCompare(t *testing.T) {
	state := pgsrctest.EndToEnd(t)
	if _, err := exec.LookPath("git"); err != nil {
		pgsrctest.Unavailable(t, err)
	}
	work := t.TempDir()
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, err := demoPrepare(ctx, filepath.Join(work, "demo.git"), true)
	if err != nil {
		t.Fatal(err)
	}
	culprit := h.Culprits[0]
	i := slices.Index(h.Commits, culprit)
	if i < 3 || i+3 >= len(h.Commits) {
		t.Fatalf("culprit at %d of %d commits: no room for the range", i, len(h.Commits))
	}
	good, bad := h.Commits[i-3], h.Commits[i+3]
	scenario, err := filepath.Abs(runScenario)
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(work, "postgresql")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+work)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, proctest.LastLines(string(out), 60))
		}
		return string(out)
	}
	git(work, "clone", "--quiet", h.Dir, clone)
	git(clone, "checkout", "--quiet", "--detach", bad)
	git(clone, "bisect", "start", bad, good)

	start := time.Now()
	cmd := exec.Command("git", "bisect", "run", os.Args[0], "compare", "--exit-code", "-s", scenario, "--repo", ".", "--state", state,
		"--set", "rows=100000", "--min-effect", "0.25", "--alpha", "0.001", "--max-samples", "30", good, "HEAD")
	cmd.Dir = clone
	cmd.Env = append(os.Environ(), cliChildEnv+"=1", "GIT_CONFIG_NOSYSTEM=1", "HOME="+work)
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	log := git(clone, "bisect", "log")
	if err != nil {
		t.Fatalf("git bisect run: %v after %s\n%s\n%s", err, wall.Round(time.Second), proctest.LastLines(string(out), 80), log)
	}
	if !strings.Contains(string(out), culprit+" is the first bad commit") {
		t.Fatalf("git bisect run did not name the injected regression %s:\n%s\n%s", short(culprit), proctest.LastLines(string(out), 80), log)
	}
	steps := strings.Count(log, "\n# good: ") + strings.Count(log, "\n# bad: ") + strings.Count(log, "\n# skip: ")
	t.Logf("git bisect run named %s in %s (%d steps run by pgbisect compare --exit-code):\n%s", short(culprit), wall.Round(time.Second), steps-2, log)
	if strings.Contains(log, "# skip: ") {
		t.Logf("note: a commit was skipped (compare exited 125: undecided within the budget)")
	}

	// pgbisect bisect's own status when the regression is not there: from
	// good to the commit just before the culprit (a regression test's
	// edit, so the build of the execMain.c comment before it) the
	// endpoints measure the same: exit 3, not 0 as for a culprit found.
	start = time.Now()
	var stdout, stderr bytes.Buffer
	code := Main(ctx, []string{"bisect", "--state", state, "--repo", clone, "-s", scenario, "--set", "rows=100000",
		"--good", good, "--bad", h.Commits[i-1], "--metric", "copy_time", "--min-effect", "0.25", "--alpha", "0.001", "--max-samples", "30",
		"--no-revert-check", "--profile-runs", "0", "--profile-guided=false", "--json"}, &stdout, &stderr)
	t.Logf("bisect of a range without the regression: exit %d in %s", code, time.Since(start).Round(time.Second))
	if code != exitNotReproduced || !strings.Contains(stderr.String(), "exit 3: outcome no-regression") {
		t.Errorf("bisect %s..%s exited %d, want %d (not reproduced):\n%s", short(good), short(h.Commits[i-1]), code, exitNotReproduced,
			proctest.LastLines(stderr.String(), 40))
	}
}
