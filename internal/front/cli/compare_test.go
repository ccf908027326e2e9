package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
)

func compareMain(t *testing.T, args ...string) (int, compareResult, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"compare"}, args...), &out, &errb)
	var res compareResult
	if code == 0 && strings.Contains(strings.Join(args, " "), "--json") {
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("compare --json output: %v\n%s", err, out.String())
		}
	}
	return code, res, out.String() + errb.String()
}

func TestCompareUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"A", "B"}, "-s SCENARIO is required"},
		{[]string{"-s", runScenario, "A"}, "give two revisions"},
		{[]string{"-s", runScenario, "A", "B", "--patch", "fix.patch"}, "with --patch give one revision"},
	} {
		code, _, out := compareMain(t, tt.args...)
		if code != 2 || !strings.Contains(out, tt.err) {
			t.Errorf("compare %q: exit %d, output %q; want 2 and %q", tt.args, code, out, tt.err)
		}
	}
}

// TestCompareSameBuild compares Debian's PostgreSQL 15 with itself: an A/A
// comparison that must not come out "different". A correct comparison
// still says "different" with probability alpha per timed metric (two
// here), so the test runs at alpha 0.001 to fail by chance about once in
// 500 runs, not once in 50 as at the default 0.01; a sampler that favoured
// one side (docs/scenarios.md measures that it does not) would still fail
// it.
func TestCompareSameBuild(t *testing.T) {
	bin := runPG15(t)
	state := runState(t)
	code, res, out := compareMain(t, "-s", runScenario, "--state", state, "--set", "rows=100000",
		"--max-samples", "10", "--alpha", "0.001", "--json", bin, bin)
	if code != 0 {
		t.Fatalf("compare exited %d:\n%s", code, out)
	}
	if len(res.Points) != 1 || len(res.Points[0].Metrics) == 0 {
		t.Fatalf("unexpected result %+v", res)
	}
	for _, m := range res.Points[0].Metrics {
		c := m.Comparison
		if c.Verdict.Different() {
			t.Errorf("%s: A/A comparison judged %s (ratio %.3f [%.3f, %.3f], p %.4f)", m.Name, c.Verdict, c.Ratio, c.Lo, c.Hi, c.P)
		}
		if c.A.N < stats.DefaultThresholds.FirstLook() || c.A.N != c.B.N || c.A.N > 10 {
			t.Errorf("%s: n = %d+%d, want equal sides between the start and the budget", m.Name, c.A.N, c.B.N)
		}
	}
}

// TestCompareDeliberateSlowdown builds the demo history's commit that adds
// per-row work to COPY FROM and its parent (incremental builds on the
// shared fixture build) and checks that compare calls it a regression, and
// that the comparison in the other order (compare CULPRIT PARENT) calls it
// an improvement that agrees: the intervals of B/A in one order and of A/B
// in the other overlap. A sampler that favoured the side that starts would
// move the two apart (issue 22: 3 to 5 points on concurrent COPY).
func TestCompareDeliberateSlowdown(t *testing.T) {
	state := pgsrctest.EndToEnd(t)
	work := t.TempDir()
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := demoPrepare(context.Background(), filepath.Join(work, "demo.git"), true)
	if err != nil {
		t.Fatal(err)
	}
	culprit := h.Culprits[0]
	parent := ""
	for i, c := range h.Commits {
		if c == culprit {
			parent = h.Commits[i-1]
		}
	}
	compare := func(a, b string, want stats.Verdict) map[string]stats.Comparison {
		code, res, out := compareMain(t, "-s", runScenario, "--state", state, "--repo", h.Dir,
			"--set", "rows=100000", "--point", "", "--min-effect", "0.05", "--max-samples", "20", "--json", a, b)
		if code != 0 {
			t.Fatalf("compare exited %d:\n%s", code, out)
		}
		if res.OrderSeed == 0 {
			t.Error("the JSON output does not record the order seed")
		}
		got := map[string]stats.Comparison{}
		for _, m := range res.Points[0].Metrics {
			if m.Name == "copy_time" || m.Name == "parse_time" {
				c := m.Comparison
				got[m.Name] = c
				if c.Verdict != want {
					t.Errorf("compare %s %s: %s: %s, want %s (ratio %.3f [%.3f, %.3f], p %.4f, n %d+%d)",
						build.Short(a), build.Short(b), m.Name, c.Verdict, want, c.Ratio, c.Lo, c.Hi, c.P, c.A.N, c.B.N)
				}
			}
		}
		return got
	}
	ab := compare(parent, culprit, stats.Regression)
	ba := compare(culprit, parent, stats.Improvement)
	for name, c := range ab {
		r := ba[name]
		// r estimates parent/culprit: its reciprocal interval is [1/Hi, 1/Lo].
		if c.Hi < 1/r.Hi || 1/r.Lo < c.Lo {
			t.Errorf("%s: compare A B gives %.3f [%.3f, %.3f], compare B A the reciprocal %.3f [%.3f, %.3f]: the orders disagree",
				name, c.Ratio, c.Lo, c.Hi, 1/r.Ratio, 1/r.Hi, 1/r.Lo)
		} else {
			t.Logf("%s: A B %.3f [%.3f, %.3f], B A reciprocal %.3f [%.3f, %.3f]", name, c.Ratio, c.Lo, c.Hi, 1/r.Ratio, 1/r.Hi, 1/r.Lo)
		}
	}
}
