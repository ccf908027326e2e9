package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/profile"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/notify"
)

// DefaultProfileRuns is the most profiled runs each side of a confirmed
// culprit gets unless --profile-runs says otherwise: 5 a side lets the
// rank test reach p = 0.008.
const DefaultProfileRuns = 5

// ProfileFirstRuns is the profiled runs each side of a culprit gets
// before the first look: 4 is the fewest at which the rank test can show a
// function's growth (p = 0.029 < 0.05). The runs stop there when the
// function whose self share grew most is shown to have grown (profileDecided);
// otherwise one more run a side at a time, up to the profile runs asked for.
const ProfileFirstRuns = 4

// profileDecided reports whether a profile comparison has shown where the
// time went: the function whose self share grew most grew in every
// culprit run against every parent run beyond chance (p < 0.05).
func profileDecided(d profile.Diff) bool {
	top := d.TopGrowers(1, false)
	return len(top) == 1 && top[0].PSelf < 0.05
}

// bisectProfileJob is what profiling the culprits of a finished bisection
// needs; the bisection's own runner and builder are reused, so the builds
// are cache hits and the clusters already set up.
type bisectProfileJob struct {
	Sink     Sink
	Log      *slog.Logger
	StateDir string
	ID       string // the bisection's, naming the cache of its profiles
	Runs     int    // per side; 0 profiles nothing
	Runner   *bench.Runner
	Builder  *bisectBuilder
	Options  build.Options
	// FramePointers, when set, builds the culprit and its parent again
	// with -fno-omit-frame-pointer (a build key and worktree of their
	// own; the first such build is a full one) and profiles those, so
	// that inclusive shares are exact. Otherwise the bisection's own
	// builds are profiled.
	FramePointers *build.Builder
	Scenario      *bench.Scenario
	Point         bench.Point
}

// profileCulprits profiles every confirmed culprit of f against its parent
// and puts "where the time went" in f: the table in the culprit's Profile,
// the differential flame graph next to the report. It never fails the
// bisection: whatever goes wrong becomes a warning of the profile. A
// resumed bisection reuses the profiles taken before (saved under
// <state>/profiles/<bisection>/); one that could not be taken is tried
// again.
func (j bisectProfileJob) profileCulprits(ctx context.Context, f *finding.Finding) {
	if j.Runs <= 0 {
		return
	}
	for i := range f.Culprits {
		c := &f.Culprits[i]
		if c.IsRange() || !c.Verified || c.Parent.Hash == "" {
			continue // only a confirmed single commit is worth profiling
		}
		name := fmt.Sprintf("flame-%s.svg", c.Commit.ShortHash())
		key := fmt.Sprintf("%s-%s-%d", c.Commit.ShortHash(), c.Parent.ShortHash(), j.Runs)
		if j.FramePointers != nil {
			key += "-fp"
		}
		at := j
		if len(f.Points) > 0 { // several points: where it was blamed
			at.Point = culpritPoint(j.Scenario, j.Point, *c)
			key += "-" + at.Point.String()
		}
		cache := filepath.Join(j.StateDir, "profiles", j.ID, key)
		p, err := j.cached(cache)
		if err != nil {
			p = at.profile(ctx, c.Parent.Hash, c.Commit.Hash, cache+".svg", "")
			if ctx.Err() != nil {
				return
			}
			// Only a profile that was taken is kept: one that failed (no
			// perf, a failed sample) is tried again when the bisection is.
			if data, err := json.Marshal(p); err == nil && p.ParentRuns > 0 && p.CulpritRuns > 0 {
				if err := os.MkdirAll(filepath.Dir(cache), 0o755); err == nil {
					os.WriteFile(cache+".json", data, 0o644)
				}
			}
		}
		if p.FlameGraph != "" {
			p.FlameGraph = name
			if err := bisectCopyFile(cache+".svg", filepath.Join(notify.ReportsDir(j.StateDir), f.ID, name)); err != nil {
				p.FlameGraph = ""
				p.Warnings = append(p.Warnings, "no flame graph: "+err.Error())
			}
		}
		c.Profile = p
		j.Sink.note("==> where the time went in %s: %s", c.Commit.ShortHash(), bisectProfileLine(p))
	}
}

// bisectProfileLine sums up a profile in one line: the top three self
// growers, or why there are none.
func bisectProfileLine(p *finding.Profile) string {
	var parts []string
	for i, r := range p.Self {
		if i == 3 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %+.1f points (p %.3g)", r.Function, 100*r.Change, r.P))
	}
	if len(parts) == 0 {
		if len(p.Warnings) > 0 {
			return p.Warnings[0]
		}
		return "no function's self share grew"
	}
	return "self share grew most in " + strings.Join(parts, ", ")
}

// cached reads a profile saved by an earlier process of the bisection.
func (j bisectProfileJob) cached(path string) (*finding.Profile, error) {
	data, err := os.ReadFile(path + ".json")
	if err != nil {
		return nil, err
	}
	var p finding.Profile
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// profile takes the profiled runs of parent and culprit and writes the
// flame graph to svg. intro, when given, is the line said first instead of
// "where the time went".
func (j bisectProfileJob) profile(ctx context.Context, parent, culprit, svg, intro string) *finding.Profile {
	fp := strings.Contains(j.Options.CFLAGS, build.FramePointerFlag)
	var warnings []string
	failed := func(err error) *finding.Profile {
		return &finding.Profile{Point: j.Point.String(), FramePointers: fp, Warnings: append(warnings, "no profile comparison: "+err.Error())}
	}
	var targets [2]bench.Target
	if j.FramePointers != nil && !fp {
		b := &bisectBuilder{b: j.FramePointers, sink: j.Sink}
		for i, h := range []string{parent, culprit} {
			t, err := b.Build(ctx, h)
			if err != nil {
				warnings = []string{fmt.Sprintf("profiled the builds without frame pointers: building %s with %s failed: %v", build.Short(h), build.FramePointerFlag, err)}
				targets = [2]bench.Target{}
				break
			}
			targets[i] = t.(bisectTarget).Target
			targets[i].Name += "-fp"
		}
		fp = targets[1].BinDir != ""
	}
	for i, h := range []string{parent, culprit} {
		if targets[i].BinDir != "" {
			continue
		}
		t, err := j.Builder.Build(ctx, h)
		if err != nil {
			return failed(fmt.Errorf("building %s: %w", build.Short(h), err))
		}
		targets[i] = t.(bisectTarget).Target
	}
	first := min(ProfileFirstRuns, j.Runs)
	if intro == "" {
		intro = fmt.Sprintf("==> where the time went: profiling %s against its parent %s, %d runs each", targets[1].Name, targets[0].Name, j.Runs)
		if first < j.Runs {
			intro = fmt.Sprintf("==> where the time went: profiling %s against its parent %s, %d runs each, up to %d until a function's growth is shown", targets[1].Name, targets[0].Name, first, j.Runs)
		}
	}
	j.Sink.note("%s", intro)
	pc, err := bench.CompareProfilesUntil(ctx, j.Runner, profile.Recorder{Dir: j.StateDir}, j.Scenario, targets[0], targets[1], j.Point, first, j.Runs, profileDecided, bench.Order{},
		profiledRuns(targets[1].Name, func(target string, run, cpuSamples int) {
			j.Sink.note("profiled %s run %d/%d: %d CPU samples", target, run, j.Runs, cpuSamples)
		}))
	if err != nil {
		return failed(err)
	}
	p := finding.FromProfile(j.Point.String(), pc.Diff.Summary(ProfileTop), fp)
	p.Warnings = append(warnings, p.Warnings...)
	if pc.Diff.BaseRuns > 0 && pc.Diff.CulpritRuns > 0 {
		title := fmt.Sprintf("%s: %s against its parent %s", j.Scenario.Name, targets[1].Name, targets[0].Name)
		if err := os.MkdirAll(filepath.Dir(svg), 0o755); err == nil {
			err = writeFlameGraph(svg, title, pc.Base, pc.Culprit)
		}
		if err != nil {
			p.Warnings = append(p.Warnings, "no flame graph: "+err.Error())
		} else {
			p.FlameGraph = filepath.Base(svg)
		}
	}
	return p
}

// bisectCopyFile copies src to dst, creating dst's directory.
func bisectCopyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// bisectFramePointers is the builder of profiled builds with frame
// pointers (--profile-frame-pointers), nil when not asked for.
func bisectFramePointers(on bool, sink Sink, log *slog.Logger, repo *build.Repo, stateDir string, b *build.Builder) *build.Builder {
	if !on {
		return nil
	}
	fb := build.NewBuilder(repo, stateDir, b.Options().WithFramePointers(), newLineWriter(sink, KindBuildStep), log)
	fb.Timeout = b.Timeout
	fb.BuildAs = b.BuildAs
	return fb
}

// wanted reports whether profileCulprits would profile a culprit of f.
func (j bisectProfileJob) wanted(f *finding.Finding) bool {
	if j.Runs <= 0 {
		return false
	}
	for _, c := range f.Culprits {
		if !c.IsRange() && c.Verified && c.Parent.Hash != "" {
			return true
		}
	}
	return false
}
