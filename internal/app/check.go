package app

import (
	"fmt"
	"regexp"
	"slices"
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
		// A resume is checked as a new request is: its flags come from
		// the asker as much as a new one's.
		if x.ClientBin != "" {
			return nil, errClientBin
		}
		if x.Resume != "" {
			if err := checkResume(x); err != nil {
				return nil, err
			}
			return x, nil
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
		if rev == "" {
			continue // a patched comparison's B
		}
		if err := checkRevision(rev); err != nil {
			return nil, err
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

// checkResume checks a resumed bisection's request: its ID is one a
// bisection can have (no "..": an ID names directories, profiles/ID;
// "0..", which FuzzCheck found taken, climbs none, but no ID needs one),
// and it gives none of the inputs the results store
// holds (they would be ignored, so a request naming them is a mistake).
func checkResume(r BisectRequest) error {
	if !resumeID.MatchString(r.Resume) || strings.Contains(r.Resume, "..") {
		return badRequest("--resume %q is not a bisection ID: give the ID 'pgbisect status' lists (letters, digits, '.', '_' and '-', no \"..\", at most 128)", clip(r.Resume))
	}
	if r.Scenario != "" || len(r.Set) > 0 || r.Good != "" || r.Bad != "" || r.Metric != "" || r.Point != "" || r.FirstParent {
		return badRequest("--resume takes the bisection's scenario, variables, revisions, metric and point from the results store: give none of them with it")
	}
	return nil
}

// resumeID is the syntax of a bisection's ID (finding.NewID's, a
// state's random hex).
var resumeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// MaxRevisionLen caps a revision in a request: a ref name, a hash, a tag
// with ~N or ^N after it are all far shorter.
const MaxRevisionLen = 200

// checkRevision refuses what a request may not give as a revision: a
// revision is git syntax (a hash, a tag, a branch such as
// origin/REL_16_STABLE, with ~N and ^N after it), never a path, and a
// request's revision is never looked up on the disk (a comparison
// measures an installed bin directory only for the local command line).
// Refused: control characters, spaces and any byte git's ref names
// forbid; a start but with a letter, a digit or '@' (a path, an option,
// a home directory); "..", "//",
// "/." and a trailing '/' or '.' (a range or a path's parts, which no
// ref name has); ':' (git's rev:path); '@{' (reflogs, of the daemon's own
// history); a part "bin" (an installation's directory, however the
// comparison would take it); and more than MaxRevisionLen bytes.
func checkRevision(rev string) error {
	bad := func(why string) error {
		return badRequest("%q is not a revision: %s; a queued request names revisions (a hash, a tag, a branch, with ~N or ^N), not directories", clip(rev), why)
	}
	switch {
	case rev == "":
		return bad("it is empty")
	case len(rev) > MaxRevisionLen:
		return bad(fmt.Sprintf("it is longer than %d bytes", MaxRevisionLen))
	case !isAlnum(rev[0]) && rev[0] != '@':
		// '/', '.': a path; '-': an option; '~': a home directory
		// (FuzzCheck found "~0" taken); '^', '+': no revision.
		return bad("it starts with neither a letter, a digit nor '@'")
	case strings.Contains(rev, ".."):
		return bad("it holds \"..\" (give two revisions, not a range)")
	case strings.Contains(rev, "//") || strings.Contains(rev, "/.") || strings.HasSuffix(rev, "/") || strings.HasSuffix(rev, "."):
		return bad("it has a path's parts")
	case strings.Contains(rev, "@{"):
		return bad("it names a reflog entry")
	case strings.HasSuffix(rev, ".lock"):
		return bad("no ref name ends in .lock")
	case slices.Contains(strings.Split(rev, "/"), "bin"):
		return bad("it names a bin directory")
	}
	for _, c := range []byte(rev) {
		switch {
		case isAlnum(c):
		case c == '.', c == '_', c == '-', c == '/', c == '+', c == '~', c == '^', c == '@':
		default:
			if c < ' ' || c > '~' {
				return bad(fmt.Sprintf("it holds the byte 0x%02x, which no revision has", c))
			}
			return bad(fmt.Sprintf("it holds %q, which no revision has", rune(c)))
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// clip shortens what a request gave for an error that quotes it.
func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
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
