package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestCompareAcrossReleases compares real releases the way the bot
// compares two revisions: pgbisect compare on a repository whose tags
// name the releases as upstream's do (REL_13_16, REL_15_18, REL_18_6,
// pgsrc.NewReleasesRepo), every release built with configure (their
// builds are those of TestEndToEndConfigure13 and TestEndToEndConfigure18
// and the 15.18 fixture's, shared through the test state). The scenario is
// copy-single-instructions, COPY FROM's instructions counted under
// valgrind: the counts do not depend on the machine's load, so each
// comparison decides at its first look. Measured (docs/build.md): 15.18
// executes 10.5% fewer instructions than 13.16 to COPY 50,000 rows and
// 13.7% fewer to parse them, and 18.6 1.4% and 0.6% more than 15.18 (the
// per-row costs PostgreSQL 16 added, docs/scenarios.md on copy-single).
// Opt-in: PGBISECT_TEST_RELEASES=13,18-configure.
func TestCompareAcrossReleases(t *testing.T) {
	pgsrctest.RequireRelease(t, "13")
	pgsrctest.RequireRelease(t, "18-configure")
	state := pgsrctest.EndToEnd(t)
	work := t.TempDir()
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(work, "releases.git")
	tags, err := pgsrc.NewReleasesRepo(context.Background(), repo, 13, 15, 18)
	if err != nil {
		t.Fatal(err)
	}
	scenario := "../../../configs/scenarios/copy-single-instructions.yaml"
	compare := func(a, b string, want map[string]stats.Verdict) {
		t.Helper()
		start := time.Now()
		code, res, out := compareMain(t, "-s", scenario, "--state", state, "--repo", repo,
			"--set", "rows=50000", "--max-samples", "10", "--json", a, b)
		if code != 0 {
			t.Fatalf("compare %s %s exited %d:\n%s", a, b, code, out)
		}
		for _, m := range res.Points[0].Metrics {
			c := m.Comparison
			t.Logf("%s -> %s: %s %.0f -> %.0f (%+.2f%% [%+.2f%%, %+.2f%%]), %s, n %d+%d", a, b, m.Name,
				c.A.Median, c.B.Median, 100*(c.Ratio-1), 100*(c.Lo-1), 100*(c.Hi-1), c.Verdict, c.A.N, c.B.N)
			if v, ok := want[m.Name]; ok && c.Verdict != v {
				t.Errorf("compare %s %s: %s is %s, want %s", a, b, m.Name, c.Verdict, v)
			}
		}
		t.Logf("compare %s %s: %s wall", a, b, time.Since(start).Round(time.Second))
	}
	compare(tags[0], tags[1], map[string]stats.Verdict{"copy_instructions": stats.Improvement, "parse_instructions": stats.Improvement})
	compare(tags[1], tags[2], map[string]stats.Verdict{"copy_instructions": stats.Regression})
}

// TestBisectAcrossReleases bisects, for real, a history whose commits are
// the releases 13.16, 15.18 and 18.6 in order (pgsrc.NewReleasesHistory),
// every one built with configure, on parallel-seqscan-instructions without
// workers: the instructions of a count(*) of a new 100,000-row table,
// which grew from 13.16 to 18.6. The bisection must name the release(s)
// that did it, each a whole release, and nothing else. The first commit is
// 13.16's fixture commit (its shared build); 15.18's and 18.6's are
// commits of their own, so builds of their own (18.6's in the worktree
// TestEndToEndConfigure18 left at the same tree, so only its install).
// Opt-in: PGBISECT_TEST_RELEASES=13,18-configure.
func TestBisectAcrossReleases(t *testing.T) {
	pgsrctest.RequireRelease(t, "13")
	pgsrctest.RequireRelease(t, "18-configure")
	state := pgsrctest.EndToEnd(t)
	ctx := context.Background()
	work := t.TempDir()
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(work, "history.git")
	commits, tags, err := pgsrc.NewReleasesHistory(ctx, repo, 13, 15, 18)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := Main(ctx, []string{"bisect", "--state", state, "--repo", repo,
		"-s", "../../../configs/scenarios/parallel-seqscan-instructions.yaml", "--set", "rows=100000", "--point", "workers=0",
		"--good", tags[0], "--bad", tags[2], "--max-samples", "10",
		"--no-revert-check", "--profile-runs", "0", "--profile-guided=false", "--json"}, &stdout, &stderr)
	wall := time.Since(start)
	if code != 0 {
		t.Fatalf("pgbisect bisect exited %d after %s:\n%s", code, wall.Round(time.Second), proctest.LastLines(stderr.String(), 60))
	}
	f, err := finding.Unmarshal(stdout.Bytes())
	if err != nil {
		t.Fatalf("output is not a finding: %v\n%s", err, proctest.LastLines(stdout.String(), 20))
	}
	t.Logf("%s", proctest.LastLines(stderr.String(), 30))
	if f.Kind != finding.Regression || len(f.Culprits) == 0 {
		t.Fatalf("finding %s with culprits %+v, want a regression; warnings: %v", f.Kind, f.Culprits, f.Warnings)
	}
	for _, c := range f.Culprits {
		if c.IsRange() || (c.Commit.Hash != commits[1] && c.Commit.Hash != commits[2]) {
			t.Errorf("culprit %+v is not one release (%s %s, %s %s)", c, tags[1], short(commits[1]), tags[2], short(commits[2]))
		}
	}
	st, err := storetest.Store(t).LoadBisection(ctx, f.ID[strings.LastIndexByte(f.ID, '-')+1:])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", st.Summary)
	t.Logf("bisection across releases: %s wall, %d builds (%s), %d samples (%s)", wall.Round(time.Second),
		st.BuildsDone, st.BuildTime.Round(time.Second), st.SamplesTaken, st.MeasureTime.Round(time.Second))
}
