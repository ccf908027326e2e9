package notify

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/testkit/golden"
)

// TestGoldenReports renders every fixed finding in every format.
func TestGoldenReports(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			f := fx.f()
			if err := f.Validate(); err != nil {
				t.Fatal(err)
			}
			f.Plots = []string{"bisection.png", "bisection.svg"}
			golden.Check(t, fx.name+".md", MarkdownFile(f))
			golden.Check(t, fx.name+".txt", TextFile(f))
			js, err := finding.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, fx.name+".json", string(js))

			// The JSON form reads back to the same finding.
			back, err := finding.Unmarshal(js)
			if err != nil {
				t.Fatal(err)
			}
			js2, err := finding.Marshal(back)
			if err != nil {
				t.Fatal(err)
			}
			if string(js2) != string(js) {
				t.Errorf("JSON does not survive a round trip")
			}
		})
	}
}

// TestMarshalNaN checks a finding with the NaN that stats returns for a
// non-positive median can still be saved, and that the caller's finding is
// left as it was.
func TestMarshalNaN(t *testing.T) {
	f := twoCulprits()
	f.Culprits[0].Comparisons[0].Ratio = math.NaN()
	f.Log[0].Samples[0] = math.Inf(1)
	js, err := finding.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := finding.Unmarshal(js)
	if err != nil {
		t.Fatal(err)
	}
	if back.Culprits[0].Comparisons[0].Ratio != 0 || back.Log[0].Samples[0] != 0 {
		t.Errorf("non-finite values not zeroed")
	}
	if !math.IsNaN(f.Culprits[0].Comparisons[0].Ratio) || !math.IsInf(f.Log[0].Samples[0], 1) {
		t.Errorf("Marshal changed its argument")
	}
	if !strings.Contains(Markdown(back, Options{}), "?%") {
		t.Errorf("a missing ratio is not shown as ?%%")
	}
}

// TestFromStats checks the conversion from bench/stats keeps every number
// and the verdict.
func TestFromStats(t *testing.T) {
	sc := stats.Comparison{Verdict: stats.Regression, Direction: stats.LowerIsBetter,
		A: stats.Summary{N: 10, Median: 10, RelStddev: 0.01}, B: stats.Summary{N: 10, Median: 12, RelStddev: 0.011},
		Ratio: 1.2, Lo: 1.18, Hi: 1.22, Confidence: 0.95, P: 0.0002}
	c := finding.FromStats("elapsed", "s", "clients=1", sc)
	want := finding.Comparison{Metric: "elapsed", Unit: "s", Direction: stats.LowerIsBetter, Point: "clients=1",
		Good: finding.Side{Median: 10, RelStddev: 0.01, N: 10}, Bad: finding.Side{Median: 12, RelStddev: 0.011, N: 10},
		Ratio: 1.2, RatioLow: 1.18, RatioHigh: 1.22, Confidence: 0.95, P: 0.0002, Verdict: "regression"}
	if c != want {
		t.Errorf("FromStats = %+v from %+v", c, sc)
	}
	sc.Direction, sc.Verdict, sc.Ratio = stats.HigherIsBetter, stats.Inconclusive, math.NaN()
	if c := finding.FromStats("tps", "tps", "", sc); c.Direction != stats.HigherIsBetter || c.Verdict != "inconclusive" || c.Ratio != 0 {
		t.Errorf("FromStats = %+v", c)
	}
}

// TestValidate rejects what renderers and the outbox cannot handle.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*finding.Finding)
		want string
	}{
		{"bad id", func(f *finding.Finding) { f.ID = "../etc/passwd" }, "finding id"},
		{"unknown kind", func(f *finding.Finding) { f.Kind = "slower" }, "unknown kind"},
		{"regression without culprit", func(f *finding.Finding) { f.Culprits = nil }, "at least one culprit"},
		{"newer format", func(f *finding.Finding) { f.Version = finding.FormatVersion + 1 }, "upgrade pgbisect"},
	} {
		f := twoCulprits()
		tc.mod(f)
		if err := f.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if _, err := finding.Unmarshal([]byte(`{"id": "x", "kind": "regression", "culprit": []}`)); err == nil || !strings.Contains(err.Error(), `unknown field "culprit"`) {
		t.Errorf("Unmarshal accepted an unknown field: %v", err)
	}
	if got := finding.NewID(time.Date(2026, 1, 30, 2, 15, 0, 0, time.FixedZone("CET", 3600)), "copy single/x", "9f8377f7a27910bf0f35"); got != "20260130T011500Z-copy-single-x-9f8377f7a2" {
		t.Errorf("NewID = %q", got)
	}
}

// TestCommitURL covers the hosts pgbisect links commits on.
func TestCommitURL(t *testing.T) {
	for repo, want := range map[string]string{
		"https://git.postgresql.org/git/postgresql.git": "https://git.postgresql.org/gitweb/?p=postgresql.git;a=commitdiff;h=abc",
		"https://github.com/postgres/postgres.git":      "https://github.com/postgres/postgres/commit/abc",
		"git@github.com:postgres/postgres.git":          "https://github.com/postgres/postgres/commit/abc",
		"https://gitlab.com/a/b":                        "https://gitlab.com/a/b/-/commit/abc",
		"/var/lib/pgbisect/postgresql":                  "",
	} {
		if got := CommitURL(repo, "abc"); got != want {
			t.Errorf("CommitURL(%q) = %q, want %q", repo, got, want)
		}
	}
}
