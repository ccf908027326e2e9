package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/build"
)

// TestCompareExitCode: the verdicts become git bisect run's statuses; a
// regression anywhere wins, an undecided metric skips, recorded metrics
// do not count.
func TestCompareExitCode(t *testing.T) {
	m := func(name string, v stats.Verdict, record bool) compareMetricResult {
		return compareMetricResult{Name: name, Record: record, Comparison: stats.Comparison{Verdict: v}}
	}
	res := func(ms ...compareMetricResult) *compareResult {
		return &compareResult{A: "aaaa", B: "bbbb", Points: []comparePointResult{{Point: "clients=1", Metrics: ms}}}
	}
	for _, tt := range []struct {
		name string
		res  *compareResult
		code int
		why  string
	}{
		{"same", res(m("copy_time", stats.Same, false), m("rows", stats.Same, false)), 0, ""},
		{"faster", res(m("copy_time", stats.Improvement, false)), 0, ""},
		{"regression", res(m("copy_time", stats.Same, false), m("parse_time", stats.Regression, false)), 1, "parse_time at clients=1 regressed in bbbb"},
		{"regression beats undecided", res(m("copy_time", stats.Inconclusive, false), m("parse_time", stats.Regression, false)), 1, "parse_time"},
		{"undecided", res(m("copy_time", stats.Inconclusive, false), m("rows", stats.Same, false)), 125, "undecided within the budget: copy_time at clients=1"},
		{"recorded regression", res(m("copy_time", stats.Same, false), m("tps", stats.Regression, true)), 0, ""},
		{"nothing judged", res(m("tps", stats.Regression, true)), 125, "judges no metric"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, why := compareExitCode(tt.res)
			if code != tt.code || !strings.Contains(why, tt.why) {
				t.Errorf("compareExitCode = %d %q, want %d %q", code, why, tt.code, tt.why)
			}
		})
	}
}

// TestCompareErrorCode: a side that does not build or cannot be measured
// skips the commit; anything else stops git bisect run.
func TestCompareErrorCode(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(live)
	cancel()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		err  error
		code int
	}{
		{"build failed", live, fmt.Errorf("building abc: %w", &build.Error{Commit: "abc", Phase: "make", Err: errors.New("exit status 2")}), 125},
		{"unmeasurable", live, fmt.Errorf("sample: %w", &bench.MeasureError{Target: "abc", Phase: "start", Err: errors.New("no server")}), 125},
		{"build timeout", live, &build.TimeoutError{Commit: "abc"}, 128},
		{"missing tools", live, &build.MissingToolsError{Tools: []string{"bison"}}, 128},
		{"bad revision", live, errors.New(`revision "nosuch" not found`), 128},
		{"interrupted", gone, fmt.Errorf("sample: %w", &bench.MeasureError{Target: "abc", Err: context.Canceled}), 130},
	} {
		if code := compareErrorCode(tt.ctx, tt.err); code != tt.code {
			t.Errorf("%s: %d, want %d", tt.name, code, tt.code)
		}
	}
}

// TestCompareExitCodeUsage: with --exit-code a usage mistake exits 128, so
// git bisect run stops instead of marking the commit bad (2 would); without
// it, usage errors stay 2.
func TestCompareExitCodeUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"--exit-code", "A", "B"}, 128},
		{[]string{"A", "B", "--exit-code"}, 128},
		{[]string{"--exit-code", "--no-such-flag", "A", "B"}, 128},
		{[]string{"A", "B"}, 2},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"compare"}, tt.args...), &out, &errb)
		if code != tt.code {
			t.Errorf("compare %q: exit %d, want %d (stderr %q)", tt.args, code, tt.code, errb.String())
		}
	}
}

// TestBisectExitCode: every outcome has its status, found alone 0, and
// none of them is 1 or 2 (error, usage).
func TestBisectExitCode(t *testing.T) {
	for o, want := range map[bisect.Outcome]int{
		bisect.OutcomeFound:        0,
		bisect.OutcomeNoRegression: 3,
		bisect.OutcomeImprovement:  3,
		bisect.OutcomeNotShown:     4,
		bisect.OutcomeUnresolved:   4,
		bisect.OutcomeTimeBound:    4,
		bisect.OutcomeBroken:       5,
	} {
		if got := bisectExitCode(o); got != want {
			t.Errorf("%s: %d, want %d", o, got, want)
		}
		err := bisectStatus(o)
		if (err == nil) != (want == 0) {
			t.Errorf("%s: bisectStatus %v", o, err)
		}
	}
}

// TestExitStatusThroughMain: a command's exitStatus is Main's status, its
// message printed once.
func TestExitStatusThroughMain(t *testing.T) {
	register(command{Name: "zzexit", Summary: "test", Run: func(context.Context, *Env) error {
		return &exitStatus{code: exitInconclusive, err: errors.New("exit 4: outcome unresolved")}
	}})
	defer delete(commands, "zzexit")
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"zzexit"}, &out, &errb); code != 4 || errb.String() != "pgbisect zzexit: exit 4: outcome unresolved\n" {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}
