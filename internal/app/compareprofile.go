package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/profile"
)

// ProfileTop is how many growers of each kind a profile summary keeps.
const ProfileTop = 10

// profiledRuns is the progress callback of bench.CompareProfiles: it
// numbers each side's profiled runs (the side whose target is named b, or
// the other) and tells note the run's target, number and CPU samples.
func profiledRuns(b string, note func(target string, run, cpuSamples int)) func(bench.Sample) {
	done := map[bool]int{}
	return func(s bench.Sample) {
		side := s.Target == b
		done[side]++
		n := 0
		if s.Profile != nil {
			n = s.Profile.Samples
		}
		note(s.Target, done[side], n)
	}
}

// compareProfiled takes runs more samples of each side at pt, in order,
// with perf recording the server, and returns the profile diff of B
// against A. The
// verdict is already made from unprofiled samples: these samples are
// slowed by the profiler and only say where the CPU time went.
func compareProfiled(ctx context.Context, r *bench.Runner, sc *bench.Scenario, targets [2]bench.Target, pt bench.Point, order bench.Order, runs int, svgPath string, sink Sink) (*profile.Summary, error) {
	pc, err := bench.CompareProfiles(ctx, r, profile.Recorder{Dir: r.StateDir}, sc, targets[0], targets[1], pt, runs, order,
		profiledRuns(targets[1].Name, func(target string, run, cpuSamples int) {
			sink.note("compare%s: profiled %s run %d/%d (%d CPU samples)", pointLabel(pt), target, run, runs, cpuSamples)
		}))
	if err != nil {
		return nil, err
	}
	sum := pc.Diff.Summary(ProfileTop)
	if svgPath != "" && pc.Diff.BaseRuns > 0 && pc.Diff.CulpritRuns > 0 {
		title := fmt.Sprintf("%s%s: %s against %s", sc.Name, pointLabel(pt), targets[1].Name, targets[0].Name)
		if err := writeFlameGraph(svgPath, title, pc.Base, pc.Culprit); err != nil {
			return nil, err
		}
		sink.note("compare%s: differential flame graph in %s", pointLabel(pt), svgPath)
	}
	return &sum, nil
}

func writeFlameGraph(path, title string, base, culprit profile.Profile) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("flame graph: %w", err)
	}
	if err := profile.FlameGraphSVG(f, title, base, culprit); err != nil {
		f.Close()
		return fmt.Errorf("flame graph %s: %w", path, err)
	}
	return f.Close()
}

// flameGraphPath is the --flamegraph file for pt: the file itself for a
// single point, with the point inserted before the extension otherwise.
func flameGraphPath(path string, pt bench.Point, points int) string {
	if path == "" || points <= 1 {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + strings.NewReplacer(",", "-", "=", "").Replace(pt.String()) + ext
}
