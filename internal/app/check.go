package app

import (
	"github.com/pgbisect/pgbisect/bench"
)

// Check checks a bisection or comparison as it is queued, with what can be
// known without the repository: the request's own fields, its scenario
// file (it loads with its variables), the metric and the point. A request
// that passes may still fail on its revisions when it runs. Errors wrap
// ErrBadRequest: each is the asker's to fix. Those about the scenario, the
// metric or the point are a *CheckError naming it.
func Check(r Request) error {
	var scenario string
	var set map[string]string
	switch r := r.(type) {
	case BisectRequest:
		if err := r.Validate(); err != nil {
			return err
		}
		if r.Resume != "" {
			return nil // its inputs are in the results store
		}
		scenario, set = r.Scenario, r.Set
	case CompareRequest:
		if err := r.Validate(); err != nil {
			return err
		}
		scenario, set = r.Scenario, r.Set
	default:
		return badRequest("a %s request is not checked before it is queued", r.Kind())
	}
	sc, err := bench.LoadFileWith(scenario, set)
	if err != nil {
		return &CheckError{"scenario", err}
	}
	switch r := r.(type) {
	case BisectRequest:
		if _, err := bisectMetric(sc, r.Metric); err != nil {
			return &CheckError{"metric", err}
		}
		if _, err := bisectPoint(sc, r.Point); err != nil {
			return &CheckError{"point", err}
		}
	case CompareRequest:
		if _, err := pointsOf(sc, r.Point); err != nil {
			return &CheckError{"point", err}
		}
	}
	return nil
}

// CheckError is a request's scenario, metric or point found wrong by
// Check.
type CheckError struct {
	// Field is "scenario", "metric" or "point".
	Field string
	Err   error
}

func (e *CheckError) Error() string { return e.Err.Error() }

// Unwrap makes a CheckError match ErrBadRequest and its cause.
func (e *CheckError) Unwrap() []error { return []error{ErrBadRequest, e.Err} }

// Validate checks what can be checked of a comparison without the
// repository or the scenario file, as 'pgbisect compare' does.
func (r CompareRequest) Validate() error {
	switch {
	case r.Scenario == "":
		return badRequest("give -s SCENARIO")
	case r.A == "":
		return badRequest("give the baseline revision A")
	case r.B == "" && len(r.Patches) == 0 && len(r.PatchData) == 0:
		return badRequest("give the candidate revision B (or patches to apply on A)")
	case r.B != "" && (len(r.Patches) > 0 || len(r.PatchData) > 0):
		return badRequest("give B or patches, not both: with patches, B is A with them applied")
	case r.Alpha < 0 || r.Alpha >= 0.5:
		return badRequest("--alpha %g is out of range: use a small probability such as 0.01", r.Alpha)
	case r.MinEffect < 0 || r.MinEffect >= 1:
		return badRequest("--min-effect %g is out of range: it is a fraction, 0.05 means 5%%", r.MinEffect)
	case r.MaxSamples < 0:
		return badRequest("--max-samples %d: give a number of samples per side, or 0 for the default", r.MaxSamples)
	case r.Profile && r.ProfileRuns < 1:
		return badRequest("--profile-runs must be 1 or more (5 by default; 4 a side is the fewest that can reach p < 0.05)")
	case r.FlameGraph != "" && !r.Profile:
		return badRequest("--flamegraph needs --profile")
	}
	return nil
}
