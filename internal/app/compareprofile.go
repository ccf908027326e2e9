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

// compareProfiled takes runs more samples of each side at pt, in order,
// with perf recording the server, and returns the profile diff of B
// against A. The
// verdict is already made from unprofiled samples: these samples are
// slowed by the profiler and only say where the CPU time went.
func compareProfiled(ctx context.Context, r *bench.Runner, sc *bench.Scenario, targets [2]bench.Target, pt bench.Point, order bench.Order, runs int, svgPath string, sink Sink) (*profile.Summary, error) {
	r.Profiler = &profile.Recorder{Dir: r.StateDir}
	defer func() { r.Profiler = nil }()
	var sides [2][]profile.Profile
	err := bench.Interleave(ctx, r, sc, targets[:], pt, order.Rounds(0, runs), func(s bench.Sample) error {
		side := 0
		if s.Target == targets[1].Name {
			side = 1
		}
		if s.Profile != nil {
			sides[side] = append(sides[side], *s.Profile)
			sink.note("compare%s: profiled %s run %d/%d (%d CPU samples)", pointLabel(pt), s.Target, len(sides[side]), runs, s.Profile.Samples)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("profiled runs: %w", err)
	}
	d := profile.Compare(sides[0], sides[1])
	sum := d.Summary(ProfileTop)
	if svgPath != "" && d.BaseRuns > 0 && d.CulpritRuns > 0 {
		title := fmt.Sprintf("%s%s: %s against %s", sc.Name, pointLabel(pt), targets[1].Name, targets[0].Name)
		if err := writeFlameGraph(svgPath, title, profile.Merge(sides[0]), profile.Merge(sides[1])); err != nil {
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
