package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/profile"
)

// compareProfileTop is how many growers of each kind the table shows.
const compareProfileTop = 10

// compareProfiled takes runs more samples of each side at pt, in order,
// with perf recording the server, and returns the profile diff of B
// against A. The
// verdict is already made from unprofiled samples: these samples are
// slowed by the profiler and only say where the CPU time went.
func compareProfiled(ctx context.Context, env *Env, r *bench.Runner, sc *bench.Scenario, targets [2]bench.Target, pt bench.Point, order bench.Order, runs int, svgPath string) (*profile.Summary, error) {
	done := [2]int{}
	pc, err := bench.CompareProfiles(ctx, r, profile.Recorder{Dir: r.StateDir}, sc, targets[0], targets[1], pt, runs, order, func(s bench.Sample) {
		side := 0
		if s.Target == targets[1].Name {
			side = 1
		}
		done[side]++
		n := 0
		if s.Profile != nil {
			n = s.Profile.Samples
		}
		fmt.Fprintf(env.Stderr, "compare%s: profiled %s run %d/%d (%d CPU samples)\n", runPointLabel(pt), s.Target, done[side], runs, n)
	})
	if err != nil {
		return nil, err
	}
	sum := pc.Diff.Summary(compareProfileTop)
	if svgPath != "" && pc.Diff.BaseRuns > 0 && pc.Diff.CulpritRuns > 0 {
		title := fmt.Sprintf("%s%s: %s against %s", sc.Name, runPointLabel(pt), targets[1].Name, targets[0].Name)
		if err := writeFlameGraph(svgPath, title, pc.Base, pc.Culprit); err != nil {
			return nil, err
		}
		fmt.Fprintf(env.Stderr, "compare%s: differential flame graph in %s\n", runPointLabel(pt), svgPath)
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

// compareProfilePrint writes the "where the time went" table of a point.
func compareProfilePrint(w io.Writer, point string, s *profile.Summary) {
	if point != "" {
		fmt.Fprintf(w, "\npoint %s, B against A. ", point)
	} else {
		fmt.Fprint(w, "\nB against A. ")
	}
	s.WriteTable(w)
}
