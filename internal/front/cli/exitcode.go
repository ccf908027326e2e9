package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/app"
)

// Exit statuses beyond 0 (success), 1 (error) and 2 (usage) that carry a
// result (docs/cli.md, "Exit status"). compare --exit-code speaks git
// bisect run's language: 0 good, 1 bad, 125 skip this commit, and 128
// (git's own fatal status; any status above 127 aborts git bisect run)
// for a mistake that is not the commit's, so a typo in the scenario's name
// never marks every commit bad.
const (
	exitRegression     = 1   // compare --exit-code: a judged metric regressed
	exitNotReproduced  = 3   // bisect: bad is not slower than good (same or faster)
	exitInconclusive   = 4   // bisect: the endpoints differ or may differ, but no culprit was named
	exitBrokenEndpoint = 5   // bisect: an endpoint cannot be built or measured
	exitSkip           = 125 // compare --exit-code: undecided, or a side cannot be built or measured
	exitAbort          = 128 // compare --exit-code: any other error (git bisect run stops)
	exitInterrupted    = 130 // interrupted (SIGINT, SIGTERM, SIGHUP)
)

// exitStatus is an error that makes Main exit with code. With err nil the
// command has already printed its result and Main prints nothing.
type exitStatus struct {
	code int
	err  error
}

func (e *exitStatus) Error() string {
	if e.err == nil {
		return "exit status " + strconv.Itoa(e.code)
	}
	return e.err.Error()
}

func (e *exitStatus) Unwrap() error { return e.err }

// compareExitCode is compare --exit-code's status for a finished
// comparison, with a line saying why: 1 when any judged metric at any
// point regressed, else 125 (skip) when any judged metric is undecided, or
// when nothing was judged, else 0 (every judged metric the same or
// better). Recorded metrics do not count.
func compareExitCode(res *compareResult) (int, string) {
	var undecided []string
	judged := 0
	for _, p := range res.Points {
		for _, m := range p.Metrics {
			if m.Record {
				continue
			}
			judged++
			name := m.Name
			if p.Point != "" {
				name += " at " + p.Point
			}
			switch m.Comparison.Verdict {
			case stats.Regression:
				return exitRegression, fmt.Sprintf("exit %d: %s regressed in %s against %s", exitRegression, name, res.B, res.A)
			case stats.Same, stats.Improvement:
			default:
				undecided = append(undecided, name)
			}
		}
	}
	switch {
	case judged == 0:
		return exitSkip, fmt.Sprintf("exit %d (skip): the scenario judges no metric", exitSkip)
	case len(undecided) > 0:
		return exitSkip, fmt.Sprintf("exit %d (skip): undecided within the budget: %s (raise --max-samples or --min-effect to decide)",
			exitSkip, strings.Join(undecided, ", "))
	}
	return 0, ""
}

// compareErrorCode is compare --exit-code's status for a comparison that
// failed with err: 125 when a side does not build or cannot be measured
// (git bisect run skips the commit), 130 when interrupted, else 128 (git
// bisect run stops: a build timeout, missing tools, a bad scenario or
// revision are not the commit's verdict).
func compareErrorCode(ctx context.Context, err error) int {
	switch {
	case ctx.Err() != nil:
		return exitInterrupted
	case errors.Is(err, build.ErrBuildFailed), errors.Is(err, app.ErrUnmeasurable):
		return exitSkip
	default:
		return exitAbort
	}
}

// wantsExitCode reports whether args ask for --exit-code before any "--",
// for the usage errors found before the flags are parsed.
func wantsExitCode(args []string) bool {
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[:i]
	}
	return slices.Contains(args, "--exit-code") || slices.Contains(args, "-exit-code") ||
		slices.Contains(args, "--exit-code=true") || slices.Contains(args, "-exit-code=true")
}

// bisectExitCode is the status of a finished bisection: 0 when it named
// culprits (outcome found), 3 when the regression did not reproduce at the
// endpoints (bad measured the same as good, or faster), 4 when it is
// inconclusive (the endpoint comparison ran out of budget, no culprit
// survived the checks, or the time bound stopped it), 5 when an endpoint
// cannot be built or measured.
func bisectExitCode(o bisect.Outcome) int {
	switch o {
	case bisect.OutcomeFound:
		return 0
	case bisect.OutcomeNoRegression, bisect.OutcomeImprovement:
		return exitNotReproduced
	case bisect.OutcomeBroken:
		return exitBrokenEndpoint
	default: // not-shown, unresolved, time-bound
		return exitInconclusive
	}
}
