package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"
	"github.com/pgbisect/pgbisect/internal/testkit/pghistory"
	"github.com/pgbisect/pgbisect/notify"
)

// The real window the test bisects: upstream master around the commit the
// PG16 COPY thread blamed for single-client COPY FROM (a palloc/pfree per
// row in NextCopyFrom). These are the test's expectations, never inputs to
// anything that decides.
const (
	realGood = "9f8377f7a27~3" // b2bd9a6796 "Fix expected test output"
	// 22 commits after the culprit, the first where its revert conflicts
	// (for git revert too), because it changed the culprit's own lines: a
	// fix to it that costs another +1.0% of the COPY's instructions
	// (fieldno < list_length(attnumlist), a call per field of every row,
	// put before the cheap default_print test). The revert check of
	// 9f8377f7a27 must revert it one commit earlier, on 483bdb2afe.
	realBad     = "b85e91023b"  // "Don't try to read default for a non-existent attribute"
	realCulprit = "9f8377f7a27" // "Add a DEFAULT option to COPY FROM"
)

// TestRealHistoryNamesCopyCulprit bisects real upstream history
// (../shared/pg-history, the PG16 cycle) as a hacker would with their own
// clone: `pgbisect bisect --repo CLONE` on copy-single-instructions from 3
// commits before 9f8377f7a27 to 22 after it, on instruction counts. It
// must name exactly two culprits, each verified against its parent:
// 9f8377f7a27 (the commit upstream blamed), +2% to +6% (3.9% here), and
// b85e91023b, its follow-up fix, +0.5% to +2% (1.0% here; see realBad).
// The revert of 9f8377f7a27 conflicts on the bad commit, as git revert's
// does: the check must revert it on the latest commit where it merges and
// recover the change; the other checks must recover theirs. The first
// build is a full one of a real commit (about 4 minutes with a cold
// ccache), the others incremental.
func TestRealHistoryNamesCopyCulprit(t *testing.T) {
	repo := pghistory.Repo(t, pghistory.PG16)
	state := pgsrctest.EndToEnd(t)
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := Main(context.Background(), []string{"bisect", "--state", state, "--repo", repo,
		"-s", "../../../configs/scenarios/copy-single-instructions.yaml", "--metric", "copy_instructions",
		"--good", realGood, "--bad", realBad, "--profile-runs", "0", "--profile-guided=false", "--json"}, &stdout, &stderr)
	wall := time.Since(start)
	if code != 0 {
		t.Fatalf("pgbisect bisect exited %d after %s:\n%s", code, wall.Round(time.Second), proctest.LastLines(stderr.String(), 60))
	}
	f, err := finding.Unmarshal(stdout.Bytes())
	if err != nil {
		t.Fatalf("bisect output is not a finding: %v\n%s", err, proctest.LastLines(stdout.String(), 20))
	}
	t.Logf("real window %s..%s: %s wall, %d builds, %d samples (%v)", realGood, realBad, wall.Round(time.Second), f.Builds, f.Samples, f.SamplesBy)
	want := map[string][2]float64{realCulprit: {0.02, 0.06}, realBad: {0.005, 0.02}}
	if f.Kind != finding.Regression || len(f.Culprits) != len(want) {
		t.Fatalf("finding %s with %d culprits, want a regression with %d; warnings: %v\n%s", f.Kind, len(f.Culprits), len(want), f.Warnings,
			proctest.LastLines(stderr.String(), 30))
	}
	for _, c := range f.Culprits {
		var bounds [2]float64
		found := false
		for h, b := range want {
			if strings.HasPrefix(c.Commit.Hash, h) {
				bounds, found = b, true
			}
		}
		if c.IsRange() || !c.Verified || !found {
			t.Errorf("culprit %s (range %v, verified %v), want %s and %s exactly", c.Commit.ShortHash(), c.IsRange(), c.Verified, realCulprit, realBad)
			continue
		}
		for _, m := range c.Comparisons {
			if m.Metric == "copy_instructions" && (m.Change < bounds[0] || m.Change > bounds[1]) {
				t.Errorf("%s: copy_instructions %+.2f%%, want %+.1f%% to %+.1f%%", c.Commit.ShortHash(), 100*m.Change, 100*bounds[0], 100*bounds[1])
			}
		}
	}
	if len(f.Reverts) != 3 {
		t.Fatalf("%d revert checks, want 3 (each culprit, then both)", len(f.Reverts))
	}
	for _, r := range f.Reverts {
		if r.Skipped != "" || !r.Recovers {
			t.Errorf("revert check of %v: skipped %q, recovers %v (%.0f%%)", r.Culprits, r.Skipped, r.Recovers, 100*r.Recovered)
		}
		moved := !r.All && strings.HasPrefix(r.Culprits[0].Hash, realCulprit)
		if moved && (r.Base == nil || r.BaseBehind != 1 || !strings.Contains(r.Conflict, "copyfromparse.c")) {
			t.Errorf("revert check of %v: base %v (%d behind), conflict %q; want it reverted 1 commit before %s, where it conflicts in copyfromparse.c",
				r.Culprits, r.Base, r.BaseBehind, r.Conflict, realBad)
		}
		if !moved && r.Base != nil {
			t.Errorf("revert check of %v moved to %s: it merges on %s", r.Culprits, r.Base.ShortHash(), realBad)
		}
	}
	var summary bytes.Buffer
	revertPrint(&summary, f)
	t.Logf("what bisect prints of the revert check:%s", summary.String())
	if md := notify.MarkdownFile(f); !strings.Contains(md, "### Revert check") || !strings.Contains(md, "of the regression (95% CI") {
		t.Errorf("the report lacks the revert check:\n%s", md)
	}
}

// TestRealHistoryGitBisectRun drives 'git bisect run pgbisect compare
// --exit-code' for real, as docs/cli.md tells a hacker to, in a clone of
// real upstream history: from the top of the work tree, git checks out
// each commit it picks and pgbisect compares the good commit with HEAD
// (--repo .) on instruction counts. git must name 9f8377f7a27 as the first
// bad commit. Then pgbisect bisect over a range without the regression
// (the three commits before it) must exit 3, not reproduced. It runs after
// TestRealHistoryNamesCopyCulprit, whose builds it finds in the cache; the
// test binary plays pgbisect (cliChildEnv), so the code run is Main's.
func TestRealHistoryGitBisectRun(t *testing.T) {
	bare := pghistory.Repo(t, pghistory.PG16)
	state := pgsrctest.EndToEnd(t)
	work := t.TempDir()
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	scenario, err := filepath.Abs("../../../configs/scenarios/copy-single-instructions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(work, "postgresql")
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+work)
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, proctest.LastLines(string(out), 60))
		}
		return string(out)
	}
	git(work, "clone", "--quiet", bare, clone)
	git(clone, "checkout", "--quiet", "--detach", realBad)
	git(clone, "bisect", "start", realBad, realGood)

	start := time.Now()
	cmd := exec.Command("git", "bisect", "run", os.Args[0], "compare", "--exit-code", "-s", scenario, "--repo", ".", "--state", state,
		realGood, "HEAD")
	cmd.Dir = clone
	cmd.Env = append(env, cliChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	log := git(clone, "bisect", "log")
	if err != nil {
		t.Fatalf("git bisect run: %v after %s\n%s\n%s", err, wall.Round(time.Second), proctest.LastLines(string(out), 80), log)
	}
	first := ""
	for _, line := range strings.Split(string(out), "\n") {
		if h, ok := strings.CutSuffix(line, " is the first bad commit"); ok {
			first = h
		}
	}
	steps := strings.Count(log, "\n# good: ") + strings.Count(log, "\n# bad: ") + strings.Count(log, "\n# skip: ") - 2
	t.Logf("git bisect run named %.11s in %s (%d steps of pgbisect compare --exit-code):\n%s", first, wall.Round(time.Second), steps, log)
	if !strings.HasPrefix(first, realCulprit) {
		t.Fatalf("git bisect run named %q as the first bad commit, want %s:\n%s", first, realCulprit, proctest.LastLines(string(out), 80))
	}
	if strings.Contains(log, "# skip: ") {
		t.Errorf("a commit was skipped (compare exited 125): instruction counts decide every step")
	}

	// pgbisect bisect's own status when the regression is not there.
	start = time.Now()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"bisect", "--state", state, "--repo", clone, "-s", scenario, "--metric", "copy_instructions",
		"--good", realGood, "--bad", realCulprit + "~1", "--no-revert-check", "--profile-runs", "0", "--profile-guided=false", "--json"}, &stdout, &stderr)
	t.Logf("bisect of %s..%s~1, without the regression: exit %d in %s", realGood, realCulprit, code, time.Since(start).Round(time.Second))
	if code != exitNotReproduced || !strings.Contains(stderr.String(), "exit 3: outcome no-regression") {
		t.Errorf("bisect exited %d, want %d (not reproduced):\n%s", code, exitNotReproduced, proctest.LastLines(stderr.String(), 40))
	}
}

var realCycle = flag.Bool("realhistory.cycle", false, "TestRealHistoryWholeCycle: bisect the whole PG16 cycle (2,538 commits) on instruction counts "+
	"(about 15 builds and 6 for the revert checks, most of them full: 60 to 90 minutes on 2 cores; docs/real-history.md)")

// TestRealHistoryWholeCycle is the README's real command on real history,
// the long study behind -realhistory.cycle: copy-single-instructions from
// where REL_15_STABLE branched to where REL_16_STABLE branched (the merge
// base of REL_15_0 and REL_16_0 to the last master commit before
// REL_16_STABLE), on instruction counts. It must name the three commits
// the PG16 COPY thread blamed, each exactly: 9f8377f7a27 (a palloc per row
// in NextCopyFrom), faff8f8e47f and 6fcda9aba83 (pg_strtoint32), and
// nothing else. Run it with
//
//	go test ./internal/front/cli -run TestRealHistoryWholeCycle -realhistory.cycle -timeout 3h -v
func TestRealHistoryWholeCycle(t *testing.T) {
	if !*realCycle {
		t.Skip("bisects 2,538 real commits for about an hour: run with -realhistory.cycle")
	}
	repo := pghistory.Repo(t, pghistory.PG16)
	state := pgsrctest.EndToEnd(t)
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := Main(context.Background(), []string{"bisect", "--state", state, "--repo", repo,
		"-s", "../../../configs/scenarios/copy-single-instructions.yaml", "--metric", "copy_instructions",
		"--good", "d31d30973a", "--bad", "5bcc7e6dc8~1", "--json"}, &stdout, io.MultiWriter(&stderr, testWriter{t}))
	wall := time.Since(start)
	if code != 0 {
		t.Fatalf("pgbisect bisect exited %d after %s:\n%s", code, wall.Round(time.Second), proctest.LastLines(stderr.String(), 60))
	}
	f, err := finding.Unmarshal(stdout.Bytes())
	if err != nil {
		t.Fatalf("bisect output is not a finding: %v", err)
	}
	t.Logf("whole PG16 cycle: %s wall, %d builds, %d samples (%v)", wall.Round(time.Second), f.Builds, f.Samples, f.SamplesBy)
	want := []string{"9f8377f7a27", "faff8f8e47f", "6fcda9aba83"}
	var named []string
	for _, c := range f.Culprits {
		named = append(named, c.Commit.ShortHash())
		ok := !c.IsRange() && c.Verified && slices.ContainsFunc(want, func(w string) bool { return strings.HasPrefix(c.Commit.Hash, w) })
		if !ok {
			t.Errorf("culprit %s (range %v, verified %v) is not one upstream blamed (%v)", c.Commit.ShortHash(), c.IsRange(), c.Verified, want)
		}
	}
	for _, w := range want {
		if !slices.ContainsFunc(f.Culprits, func(c finding.Culprit) bool { return strings.HasPrefix(c.Commit.Hash, w) }) {
			t.Errorf("upstream's culprit %s not named (named %v)", w, named)
		}
	}
	// Each culprit's revert conflicts on the cycle's last commit (for git
	// revert too): each is reverted where it still merges and must
	// recover its change. All three together conflict everywhere after
	// the newest, and that check may only say so.
	for _, r := range f.Reverts {
		if r.All {
			continue
		}
		if r.Skipped != "" || !r.Recovers {
			t.Errorf("revert check of %v: skipped %q, recovers %v (%.0f%%)", r.Culprits, r.Skipped, r.Recovers, 100*r.Recovered)
		}
	}
	var summary bytes.Buffer
	revertPrint(&summary, f)
	t.Logf("the revert checks:%s", summary.String())
}

// testWriter sends a long study's progress to the test log as it comes.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
