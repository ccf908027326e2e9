package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
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
