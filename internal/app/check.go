package app

import (
	"strings"

	"github.com/pgbisect/pgbisect/bench"
)

// Check checks a bisection or comparison that someone else queues for a
// daemon (the web form, POST /api/requests, a GitHub comment, 'pgbisect
// request'), with what can be known without the repository, and returns
// it as it is to be queued. Its scenario must be a name from sc (a path is
// refused before any file is opened, so no error can quote a file the
// request may not name); it may name no file or directory of the daemon's
// machine (a bin directory, patch files, a flame graph's path; patches
// travel in the request); its variables' values are of their kinds
// (bench); and the scenario, the metric and the point must load. A
// request that passes may still fail on its revisions when it runs.
// Errors wrap ErrBadRequest: each is the asker's to fix. Those about the
// scenario, the metric or the point are a *CheckError naming it.
func Check(r Request, sc Scenarios) (Request, error) {
	var name string
	var set map[string]string
	var revs []string
	switch x := r.(type) {
	case BisectRequest:
		if err := x.Validate(); err != nil {
			return nil, err
		}
		if x.Resume != "" {
			return x, nil // its inputs are in the results store
		}
		if x.ClientBin != "" {
			return nil, errClientBin
		}
		name, set, revs = x.Scenario, x.Set, []string{x.Good, x.Bad}
	case CompareRequest:
		if err := x.Validate(); err != nil {
			return nil, err
		}
		switch {
		case x.ClientBin != "":
			return nil, errClientBin
		case len(x.Patches) > 0:
			return nil, badRequest("patch files are paths on the daemon's machine: a queued request carries its patches in it (patch_data)")
		case x.FlameGraph != "":
			return nil, badRequest("--flamegraph names a file on the daemon's machine, which a queued request may not")
		}
		if err := x.checkPatches(); err != nil {
			return nil, err
		}
		name, set, revs = x.Scenario, x.Set, []string{x.A, x.B}
	default:
		return nil, badRequest("a %s request is not checked before it is queued", r.Kind())
	}
	name, err := sc.Name(name)
	if err != nil {
		return nil, err
	}
	for _, rev := range revs {
		// A revision, not an installation's bin directory (which a
		// comparison measures as it is) or anything else on the disk.
		if strings.HasPrefix(rev, "/") || strings.HasPrefix(rev, ".") || strings.HasPrefix(rev, "-") {
			return nil, badRequest("%q is not a revision: a queued request names revisions (a hash, a tag, a branch), not directories", rev)
		}
	}
	path, err := sc.Path(name)
	if err != nil {
		return nil, err
	}
	scen, err := bench.LoadFileWith(path, set)
	if err != nil {
		return nil, &CheckError{"scenario", err}
	}
	switch x := r.(type) {
	case BisectRequest:
		if _, err := bisectMetric(scen, x.Metric); err != nil {
			return nil, &CheckError{"metric", err}
		}
		if _, err := bisectPoint(scen, x.Point); err != nil {
			return nil, &CheckError{"point", err}
		}
		x.Scenario = name
		return x, nil
	case CompareRequest:
		if _, err := pointsOf(scen, x.Point); err != nil {
			return nil, &CheckError{"point", err}
		}
		x.Scenario = name
		return x, nil
	}
	return r, nil
}

var errClientBin = badRequest("--client-bin names a directory on the daemon's machine, which a queued request may not: the daemon's config sets bench.client_bin")

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
	case r.B != "" && len(r.Patches)+len(r.PatchData) > 0:
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
