package bisect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// This file simulates bisections of several points (curve.go) against
// separate bisections of each point over the same history, as
// Simulate does for one point.

// SimCurveConfig describes one family of simulated curves.
type SimCurveConfig struct {
	// SimConfig draws the history (commits, culprits, broken builds) and
	// the noise; its Effect is unused.
	SimConfig
	// Effects is every culprit's slowdown at each point: {0, 0.10, 0.20}
	// makes three points, the culprits invisible at the first.
	Effects []float64
	// Independent runs the one bisection without hints across points
	// (Curve.Independent).
	Independent bool
}

// SimCurveRun is the outcome of one simulated curve, bisected both ways.
type SimCurveRun struct {
	// One bisection of every point.
	Exact       bool // every point's culprits named exactly
	WrongBlames int  // culprits blamed at a point where they change nothing
	Builds      int
	Samples     int
	Curve       int // samples of curve checks, in Samples
	// Separate bisections, one per point.
	SepExact       bool
	SepWrongBlames int
	SepBuilds      int // summed
	SepKeys        int // distinct keys built: the builds with a shared build cache
	SepSamples     int
}

// SimulateCurve runs one seeded curve both ways.
func SimulateCurve(cfg SimCurveConfig, seed uint64) (SimCurveRun, error) {
	run, _, err := simulateCurve(cfg, seed, nil)
	return run, err
}

// curveLab measures a history at several points.
type curveLab struct {
	*simLab
	levels [][]float64 // per point, the true median at each commit
	points []string
}

func (l *curveLab) MeasureAt(_ context.Context, t Target, point string) (float64, error) {
	p := slices.Index(l.points, point)
	if p < 0 {
		return 0, fmt.Errorf("unknown point %s", point)
	}
	v := 100 * l.levels[p][t.(int)] * l.draw(0)
	if l.speed != nil {
		v *= l.speed.next()
	}
	return v, nil
}

// simulateCurve runs cfg with seed; step, when set, is called with the
// State after every engine step of the multi-point bisection (for the
// resume test) and may replace it.
func simulateCurve(cfg SimCurveConfig, seed uint64, step func(*State) *State) (SimCurveRun, *State, error) {
	base := cfg.SimConfig.withDefaults()
	base.Effect = 0.10 // levels come from Effects
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	h := NewSimHistory(base, rng)
	noise, err := stats.NoiseModelNamed(base.Noise)
	if err != nil {
		return SimCurveRun{}, nil, err
	}
	points := make([]string, len(cfg.Effects))
	levels := make([][]float64, len(cfg.Effects))
	for p, eff := range cfg.Effects {
		points[p] = fmt.Sprintf("clients=%d", 1<<(2*p))
		level := 1.0
		levels[p] = make([]float64, len(h.Commits))
		for i := range h.Commits {
			if slices.Contains(h.Culprits, i) {
				level *= 1 + eff
			}
			levels[p][i] = level
		}
	}
	truth := func(p int) []int {
		if cfg.Effects[p] == 0 {
			return nil
		}
		return h.Culprits
	}
	newLab := func(r *rand.Rand, driftSeed uint64) *curveLab {
		l := &curveLab{simLab: newSimLab(h, noise, base.Sigma, r), levels: levels, points: points}
		if base.Drift.On() {
			l.speed = newMachine(base.Drift, driftSeed)
		}
		return l
	}
	in := Inputs{Repo: "sim", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash,
		Scenario: "sim", Metric: "elapsed", Direction: stats.LowerIsBetter, Thresholds: base.Thresholds, Points: points}
	var run SimCurveRun

	// One bisection of every point.
	lab := newLab(rng, seed)
	s, err := NewCurveState(in, h.Commits, time.Time{})
	if err != nil {
		return run, nil, err
	}
	s.Curve.Independent = cfg.Independent
	e := &Engine{Builder: lab, Measurer: lab, Now: func() time.Time { return time.Time{} }}
	if step != nil {
		e.Saver = saverFunc(func(st *State) { *s = *step(st) })
	}
	if err := e.Run(context.Background(), s); err != nil {
		return run, nil, err
	}
	for hash, n := range lab.builds {
		if n > 1 {
			return run, nil, fmt.Errorf("commit %s built %d times", hash, n)
		}
	}
	run.Exact = true
	for p, sub := range s.Curve.Searches {
		sc := scoreTruth(sub, truth(p))
		run.Exact = run.Exact && sc.Exact
		run.WrongBlames += sc.WrongBlames
	}
	run.Builds, run.Samples, run.Curve = s.BuildsDone, s.SamplesTaken, s.Spend().Curve

	// Separate bisections, one after the other on the same machine.
	run.SepExact = true
	keys := map[string]bool{}
	rng2 := rand.New(rand.NewPCG(seed, 0x5e9a))
	for p := range points {
		lab := newLab(rng2, seed+uint64(p)*7919)
		one := &onePoint{curveLab: lab, point: points[p]}
		pin := in
		pin.Points, pin.Point = nil, points[p]
		st, err := NewState(pin, h.Commits, time.Time{})
		if err != nil {
			return run, nil, err
		}
		if err := (&Engine{Builder: lab, Measurer: one, Now: func() time.Time { return time.Time{} }}).Run(context.Background(), st); err != nil {
			return run, nil, err
		}
		sc := scoreTruth(st, truth(p))
		run.SepExact = run.SepExact && sc.Exact
		run.SepWrongBlames += sc.WrongBlames
		run.SepBuilds += st.BuildsDone
		run.SepSamples += st.SamplesTaken
		for k := range st.Builds {
			keys[k] = true
		}
	}
	run.SepKeys = len(keys)
	return run, s, nil
}

// onePoint measures a curveLab at one point, as a single-point
// bisection's Measurer.
type onePoint struct {
	*curveLab
	point string
}

func (o *onePoint) Measure(ctx context.Context, t Target) (float64, error) {
	return o.MeasureAt(ctx, t, o.point)
}

type saverFunc func(*State)

func (f saverFunc) SaveBisection(_ context.Context, s *State) error {
	f(s)
	return nil
}

// scoreTruth is score against a given list of true culprits.
func scoreTruth(s *State, culprits []int) SimRun {
	return score(s, &SimHistory{Culprits: culprits})
}

// SimCurveRow sums up many runs of one SimCurveConfig.
type SimCurveRow struct {
	Config                 SimCurveConfig
	Runs                   int
	ExactRate, WrongRate   float64
	Builds, Samples, Curve float64
	SepExactRate, SepWrong float64
	SepBuilds, SepKeys     float64
	SepSamples             float64
}

// SimulateCurveRow runs cfg runs times on workers goroutines.
func SimulateCurveRow(cfg SimCurveConfig, runs int, seed uint64, workers int) (SimCurveRow, error) {
	row := SimCurveRow{Config: cfg, Runs: runs}
	row.Config.SimConfig = cfg.SimConfig.withDefaults()
	results, err := runSeeds(runs, workers, seed, func(seed uint64) (SimCurveRun, error) { return SimulateCurve(cfg, seed) })
	if err != nil {
		return row, err
	}
	for _, x := range results {
		if x.Exact {
			row.ExactRate++
		}
		if x.WrongBlames > 0 {
			row.WrongRate++
		}
		if x.SepExact {
			row.SepExactRate++
		}
		if x.SepWrongBlames > 0 {
			row.SepWrong++
		}
		row.Builds += float64(x.Builds)
		row.Samples += float64(x.Samples)
		row.Curve += float64(x.Curve)
		row.SepBuilds += float64(x.SepBuilds)
		row.SepKeys += float64(x.SepKeys)
		row.SepSamples += float64(x.SepSamples)
	}
	f := 1 / float64(runs)
	for _, x := range []*float64{&row.ExactRate, &row.WrongRate, &row.SepExactRate, &row.SepWrong, &row.Builds, &row.Samples,
		&row.Curve, &row.SepBuilds, &row.SepKeys, &row.SepSamples} {
		*x *= f
	}
	return row, nil
}

// FormatCurveTable renders rows as a Markdown table: one bisection of
// every point against separate bisections per point.
func FormatCurveTable(rows []SimCurveRow) string {
	var b strings.Builder
	b.WriteString("| commits | culprits | effect per point | noise | drift | runs | exact: one / separate | wrong blame: one / separate | builds: one / separate (shared cache) | samples: one (curve checks) / separate |\n")
	b.WriteString("|---:|---:|---|---|---|---:|---|---|---|---|\n")
	for _, r := range rows {
		c := r.Config
		var effs []string
		for _, e := range c.Effects {
			effs = append(effs, fmt.Sprintf("%.0f%%", 100*e))
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s %.0f%% | %s | %d | %.1f%% / %.1f%% | %.1f%% / %.1f%% | %.1f / %.1f (%.1f) | %.0f (%.0f) / %.0f |\n",
			c.Commits, c.Culprits, strings.Join(effs, ", "), c.Noise, 100*c.Sigma, c.Drift, r.Runs,
			100*r.ExactRate, 100*r.SepExactRate, 100*r.WrongRate, 100*r.SepWrong,
			r.Builds, r.SepBuilds, r.SepKeys, r.Samples, r.Curve, r.SepSamples)
	}
	return b.String()
}
