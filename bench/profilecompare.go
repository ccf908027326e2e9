package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgbisect/pgbisect/bench/profile"
)

// ProfileComparison is where the CPU time went between two builds: the
// run-by-run comparison of their profiles, and each side's runs merged
// (what a flame graph draws).
type ProfileComparison struct {
	Diff profile.Diff
	// Base and Culprit are each side's profiled runs merged.
	Base, Culprit profile.Profile
}

// errNoProfiler stops the profiled runs once the first one shows perf
// cannot record at all.
var errNoProfiler = errors.New("no profiler")

// CompareProfiles takes runs profiled samples of each of base and culprit
// at pt, in order (rounds of an Order of two targets, base first), with
// rec recording the server, and compares the profiles. onSample, when
// set, sees each sample as it is taken (for progress). The samples'
// timings are not judged: the profiler slows the server, and the verdict
// comes from unprofiled samples.
//
// It degrades instead of failing: when the first profiled run has no
// samples because perf is missing or not permitted, no further runs are
// taken and the comparison's warnings say why. An error means a sample
// itself failed (or ctx ended).
func CompareProfiles(ctx context.Context, r *Runner, rec profile.Recorder, sc *Scenario, base, culprit Target, pt Point, runs int, order Order, onSample func(Sample)) (*ProfileComparison, error) {
	return CompareProfilesUntil(ctx, r, rec, sc, base, culprit, pt, runs, runs, nil, order, onSample)
}

// CompareProfilesUntil is CompareProfiles in looks (a Loop): first runs
// of each side, then one more of each at a time up to most, until decided
// holds for the comparison so far (nil: never, so most runs are taken).
func CompareProfilesUntil(ctx context.Context, r *Runner, rec profile.Recorder, sc *Scenario, base, culprit Target, pt Point, first, most int,
	decided func(profile.Diff) bool, order Order, onSample func(Sample)) (*ProfileComparison, error) {
	if first < 1 || most < first {
		return nil, fmt.Errorf("profiled runs: %d then up to %d, want at least 1 and first at most the most", first, most)
	}
	saved := r.Profiler
	r.Profiler = &rec
	defer func() { r.Profiler = saved }()
	targets := []Target{base, culprit}
	if err := r.Check(ctx, sc, targets, pt); err != nil {
		return nil, fmt.Errorf("profiled runs: %w", err)
	}
	var sides [2][]profile.Profile
	var stopped string
	var diff profile.Diff
	loop := &Loop{Scenario: sc, Point: pt, Targets: targets, Order: order, First: first,
		After: func(side int, s *Sample) error {
			p := profile.Profile{Warning: "the run has no profile"}
			if s.Profile != nil {
				p = *s.Profile
			}
			sides[side] = append(sides[side], p)
			if onSample != nil {
				onSample(*s)
			}
			if len(sides[0])+len(sides[1]) == 1 && p.Samples == 0 && p.Warning != "" {
				stopped = p.Warning
				return errNoProfiler
			}
			return nil
		},
		Next: func(n int) (int, error) {
			diff = profile.Compare(sides[0], sides[1])
			if n >= most || (decided != nil && decided(diff)) {
				return 0, nil
			}
			return 1, nil
		},
	}
	if _, err := loop.Run(ctx, r); err != nil && !errors.Is(err, errNoProfiler) {
		return nil, fmt.Errorf("profiled runs: %w", err)
	}
	if stopped != "" {
		diff = profile.Compare(sides[0], sides[1])
	}
	pc := &ProfileComparison{Diff: diff, Base: profile.Merge(sides[0]), Culprit: profile.Merge(sides[1])}
	if stopped != "" {
		pc.Diff.Warnings = []string{stopped + "; no further profiled runs were taken"}
	}
	return pc, nil
}
