package bisect

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// This file simulates bisections: seeded commit histories with known
// culprits, builds that succeed or fail as the history says, and samples
// drawn from noise models seen in PostgreSQL benchmarks. It measures how
// often the search names exactly the right culprits, how often it blames
// a wrong commit, and what it costs. It is pure and deterministic.

// SimConfig describes one family of simulated bisections.
type SimConfig struct {
	Commits  int     // commits in the range, good and bad included
	Culprits int     // regressions in the range
	Effect   float64 // each culprit's slowdown; 0 draws each from [MinEffect, MaxEffect]
	// MinEffect and MaxEffect bound random effects. Default 0.03 and 0.30.
	MinEffect, MaxEffect float64
	// Noise names the noise model, one of stats.NoiseModels (the same
	// family bench/stats' simulation of comparisons draws from); default
	// "normal".
	Noise string
	Sigma float64 // relative noise; default 0.10
	// DocFraction is the share of commits that change nothing compiled.
	// Default 0.2.
	DocFraction float64
	// BrokenStretches is the number of runs of commits that do not build,
	// each 1 to 4 commits long.
	BrokenStretches int
	// Thresholds for the bisection; zero fields take DefaultThresholds.
	Thresholds stats.Thresholds
	// Drift moves the machine's speed over the bisection; zero: none.
	Drift Drift
	// Window is the bisection's State.Window: 0 takes DefaultWindow, -1
	// reuses every sample however old (as bisections before windows did).
	Window int
	// Plan is the bisection's State.Plan: 0 takes CurrentPlan, -1 plan 0
	// (both halves of every split judged, as bisections before plans did).
	Plan int
	// Exhaustive is the bisection's State.Exhaustive: no stop when the
	// culprits explain the change.
	Exhaustive bool
	// Hints models a profile of the endpoints pointing the search at
	// commits (State.Hints); zero: no hints.
	Hints SimHints
	// MaxTime is the bisection's time bound (State.MaxTime); zero: none.
	// The simulated clock advances SampleTime per sample and BuildTime
	// per build (default 1 and 3 minutes).
	MaxTime, SampleTime, BuildTime time.Duration
}

// SimHints models how a profile of the endpoints points at commits: the
// functions whose share grew are looked up, and the commits of the range
// that touch their files become hints. Each true culprit is among them
// with probability Right (the profile names a function in a file the
// culprit changed); Others more commits, not culprits, touch the same
// files. The hints are drawn from a generator of their own, so a history
// and its noise are the same with and without them.
type SimHints struct {
	Right  float64
	Others int
	// Runs is the profiled runs the profile costs, both sides, counted as
	// samples; default 6 (internal/app's DefaultGuideRuns a side).
	Runs int
}

// On reports whether h gives any hint.
func (h SimHints) On() bool { return h.Right > 0 || h.Others > 0 }

// draw returns the hinted commits of history hs.
func (h SimHints) draw(hs *SimHistory, seed uint64) []int {
	if !h.On() {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x41175))
	var hints, others []int
	for _, c := range hs.Culprits {
		if rng.Float64() < h.Right {
			hints = append(hints, c)
		}
	}
	for i := 1; i < len(hs.Commits); i++ {
		if !hs.Commits[i].NoCompile && !slices.Contains(hs.Culprits, i) {
			others = append(others, i)
		}
	}
	for _, p := range rng.Perm(len(others))[:min(h.Others, len(others))] {
		hints = append(hints, others[p])
	}
	slices.Sort(hints)
	return hints
}

// Drift is a model of a machine whose speed changes over the hours of a
// bisection, whatever commit it runs: a factor that multiplies every
// measurement and depends only on when the sample is taken (the count of
// samples before it), never on the commit. Zero fields turn a part off.
type Drift struct {
	// Walk is the relative standard deviation of a slow random walk of the
	// machine's speed (thermal state, page cache, background daemons): a
	// mean-reverting walk of log speed, whose correlation time is WalkSpan
	// samples (default 200).
	Walk     float64
	WalkSpan int
	// Bursts is the mean number of load bursts per 1,000 samples (other
	// jobs on a shared machine). Each slows every run by BurstMin to
	// BurstMax (default 15% to 30%) for a stretch of BurstLen/2 to
	// 3*BurstLen/2 samples (default 60).
	Bursts             float64
	BurstMin, BurstMax float64
	BurstLen           int
}

// On reports whether d moves the speed at all.
func (d Drift) On() bool { return d.Walk > 0 || d.Bursts > 0 }

func (d Drift) withDefaults() Drift {
	if d.WalkSpan == 0 {
		d.WalkSpan = 200
	}
	if d.BurstMin == 0 && d.BurstMax == 0 {
		d.BurstMin, d.BurstMax = 0.15, 0.30
	}
	if d.BurstLen == 0 {
		d.BurstLen = 60
	}
	return d
}

// String names the model for tables: "walk 5%/200, 2 bursts/1000 of +15–30% × 60".
func (d Drift) String() string {
	if !d.On() {
		return "none"
	}
	d = d.withDefaults()
	var parts []string
	if d.Walk > 0 {
		parts = append(parts, fmt.Sprintf("walk %.0f%%/%d", 100*d.Walk, d.WalkSpan))
	}
	if d.Bursts > 0 {
		parts = append(parts, fmt.Sprintf("%g bursts/1000 of +%.0f–%.0f%% × %d", d.Bursts, 100*d.BurstMin, 100*d.BurstMax, d.BurstLen))
	}
	return strings.Join(parts, ", ")
}

// machine is the state of a Drift over simulated time. It draws from its
// own generator, so a history and its noise are the same with and without
// drift.
type machine struct {
	d       Drift
	rng     *rand.Rand
	logWalk float64
	burst   float64 // current slowdown, 0 outside a burst
	left    int     // samples left in the burst
}

func newMachine(d Drift, seed uint64) *machine {
	d = d.withDefaults()
	m := &machine{d: d, rng: rand.New(rand.NewPCG(seed, 0xd41f7))}
	if d.Walk > 0 {
		m.logWalk = d.Walk * m.rng.NormFloat64() // start anywhere in the stationary range
	}
	return m
}

// next returns the speed factor of the next sample (1: nominal, 1.2: every
// run 20% slower) and moves time on by one sample.
func (m *machine) next() float64 {
	d := m.d
	if d.Walk > 0 {
		// Ornstein–Uhlenbeck step with stationary stddev Walk.
		theta := 1 / float64(d.WalkSpan)
		m.logWalk = (1-theta)*m.logWalk + d.Walk*math.Sqrt(2*theta)*m.rng.NormFloat64()
	}
	if m.left == 0 {
		m.burst = 0
		if d.Bursts > 0 && m.rng.Float64() < d.Bursts/1000 {
			m.burst = d.BurstMin + (d.BurstMax-d.BurstMin)*m.rng.Float64()
			m.left = d.BurstLen/2 + m.rng.IntN(d.BurstLen+1)
		}
	}
	if m.left > 0 {
		m.left--
	}
	return math.Exp(m.logWalk) * (1 + m.burst)
}

// SimHistory is a simulated range with its truth.
type SimHistory struct {
	Commits  []Commit
	Level    []float64 // true median of the metric at each commit
	Culprits []int     // indices of the true culprits
	Broken   map[int]bool
}

// NewSimHistory draws a history for cfg.
func NewSimHistory(cfg SimConfig, rng *rand.Rand) *SimHistory {
	cfg = cfg.withDefaults()
	n := cfg.Commits
	h := &SimHistory{Commits: make([]Commit, n), Level: make([]float64, n), Broken: map[int]bool{}}
	base := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	owner := 0
	for i := range n {
		doc := i > 0 && rng.Float64() < cfg.DocFraction
		if !doc {
			owner = i
		}
		h.Commits[i] = Commit{
			Hash:    fmt.Sprintf("%016x%024x", uint64(i+1)*0x9e3779b97f4a7c15, i),
			Subject: fmt.Sprintf("commit %d", i),
			Date:    base.Add(time.Duration(i) * time.Hour),
			Key:     fmt.Sprintf("key%d", owner), NoCompile: doc,
		}
	}
	var code []int // commits that can be culprits
	for i := 1; i < n; i++ {
		if !h.Commits[i].NoCompile {
			code = append(code, i)
		}
	}
	perm := rng.Perm(len(code))
	for _, p := range perm[:min(cfg.Culprits, len(code))] {
		h.Culprits = append(h.Culprits, code[p])
	}
	slices.Sort(h.Culprits)
	for range cfg.BrokenStretches {
		// Broken stretches avoid the endpoints' builds.
		start := 1 + rng.IntN(max(1, n-6))
		for i := start; i < min(start+1+rng.IntN(4), n-1); i++ {
			if !h.Commits[i].NoCompile && h.Commits[i].Key != h.Commits[n-1].Key {
				h.Broken[i] = true
			}
		}
	}
	level := 1.0
	for i := range n {
		if slices.Contains(h.Culprits, i) {
			e := cfg.Effect
			if e == 0 {
				e = cfg.MinEffect + (cfg.MaxEffect-cfg.MinEffect)*rng.Float64()
			}
			level *= 1 + e
		}
		h.Level[i] = level
	}
	return h
}

func (cfg SimConfig) withDefaults() SimConfig {
	if cfg.MinEffect == 0 {
		cfg.MinEffect = 0.03
	}
	if cfg.MaxEffect == 0 {
		cfg.MaxEffect = 0.30
	}
	if cfg.Sigma == 0 {
		cfg.Sigma = 0.10
	}
	if cfg.Noise == "" {
		cfg.Noise = "normal"
	}
	if cfg.DocFraction == 0 {
		cfg.DocFraction = 0.2
	}
	if cfg.SampleTime == 0 {
		cfg.SampleTime = time.Minute
	}
	if cfg.BuildTime == 0 {
		cfg.BuildTime = 3 * time.Minute
	}
	return cfg
}

// simLab builds and measures a SimHistory.
type simLab struct {
	h      *SimHistory
	index  map[string]int
	rng    *rand.Rand
	draw   func(side int) float64 // the noise factor of the next run
	builds map[string]int         // builds per hash; must never exceed 1 for a key
	speed  *machine               // drift; nil: none
	// clock is the simulated time, advanced by every build and sample.
	clock                 time.Time
	sampleTime, buildTime time.Duration
}

// newSimLab returns a lab whose runs draw noise of the given model at
// relative level sigma from rng.
func newSimLab(h *SimHistory, noise stats.NoiseModel, sigma float64, rng *rand.Rand) *simLab {
	l := &simLab{h: h, index: map[string]int{}, rng: rng, draw: noise.Source(rng, sigma), builds: map[string]int{}}
	for i, c := range h.Commits {
		l.index[c.Hash] = i
	}
	return l
}

func (l *simLab) Build(_ context.Context, hash string) (Target, error) {
	i, ok := l.index[hash]
	if !ok {
		return nil, fmt.Errorf("unknown commit %s", hash)
	}
	l.builds[hash]++
	if l.builds[hash] == 1 {
		l.clock = l.clock.Add(l.buildTime) // later builds are cache hits
	}
	if l.h.Broken[i] {
		return nil, &BrokenError{Reason: "simulated compile error"}
	}
	return i, nil
}

func (l *simLab) Measure(_ context.Context, t Target) (float64, error) {
	l.clock = l.clock.Add(l.sampleTime)
	v := 100 * l.h.Level[t.(int)] * l.draw(0)
	if l.speed != nil {
		v *= l.speed.next()
	}
	return v, nil
}

// SimRun is the outcome of one simulated bisection.
type SimRun struct {
	Outcome Outcome
	// Exact: every true culprit named (alone, or in a range of candidates
	// that are all broken but it) and nothing else blamed.
	Exact bool
	// Found counts true culprits named; WrongBlames counts confirmed
	// culprits whose candidates hold no true culprit.
	Found, WrongBlames int
	Builds, Samples    int
	// Spend splits Samples by phase and verdict.
	Spend Spend
	// Bound is log2 of the commits that can be culprits: what a plain
	// binary search with perfect verdicts would build.
	Bound float64
}

// Simulate runs one seeded bisection of a history drawn for cfg.
func Simulate(cfg SimConfig, seed uint64) (SimRun, error) {
	run, _, _, err := simulate(cfg, seed)
	return run, err
}

func simulate(cfg SimConfig, seed uint64) (SimRun, *State, *SimHistory, error) {
	cfg = cfg.withDefaults()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	h := NewSimHistory(cfg, rng)
	noise, err := stats.NoiseModelNamed(cfg.Noise)
	if err != nil {
		return SimRun{}, nil, nil, err
	}
	lab := newSimLab(h, noise, cfg.Sigma, rng)
	if cfg.Drift.On() {
		lab.speed = newMachine(cfg.Drift, seed)
	}
	in := Inputs{Repo: "sim", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash,
		Scenario: "sim", Metric: "elapsed", Direction: stats.LowerIsBetter, Thresholds: cfg.Thresholds}
	s, err := NewState(in, h.Commits, time.Time{})
	if err != nil {
		return SimRun{}, nil, nil, err
	}
	if cfg.Window != 0 {
		s.Window = max(cfg.Window, 0)
	}
	if cfg.Plan != 0 {
		s.Plan = max(cfg.Plan, 0)
	}
	s.MaxTime = cfg.MaxTime
	s.Exhaustive = cfg.Exhaustive
	lab.sampleTime, lab.buildTime = cfg.SampleTime, cfg.BuildTime
	e := &Engine{Builder: lab, Measurer: lab, Now: func() time.Time { return lab.clock }}
	if cfg.Hints.On() {
		// The profile is asked for as in a real bisection: once the
		// endpoints differ, through the engine's Guide.
		hints, runs := cfg.Hints.draw(h, seed), cmp.Or(cfg.Hints.Runs, 6)
		s.Guide = &Guide{}
		e.Guide = func(context.Context, *State) (Guide, error) {
			return Guide{Runs: runs, Pointers: []GuidePointer{{Function: "simulated", Files: []string{"sim.c"}, Commits: hints}}}, nil
		}
	}
	if err := e.Run(context.Background(), s); err != nil {
		return SimRun{}, nil, nil, err
	}
	for hash, n := range lab.builds {
		if n > 1 {
			return SimRun{}, nil, nil, fmt.Errorf("commit %s built %d times", hash, n)
		}
	}
	return score(s, h), s, h, nil
}

// score compares a finished bisection with the truth.
func score(s *State, h *SimHistory) SimRun {
	run := SimRun{Outcome: s.Outcome, Builds: s.BuildsDone, Samples: s.SamplesTaken + s.guideRuns(), Spend: s.Spend(),
		Bound: math.Log2(float64(max(1, s.CandidateCount())))}
	named := map[int]bool{}
	for _, c := range s.Culprits {
		hit := false
		for _, i := range c.Candidates {
			if slices.Contains(h.Culprits, i) {
				named[i], hit = true, true
			}
		}
		if !hit {
			run.WrongBlames++
		}
	}
	run.Found = len(named)
	run.Exact = run.Found == len(h.Culprits) && run.WrongBlames == 0 && len(s.Culprits) == len(h.Culprits)
	return run
}

// SimRow sums up many runs of one SimConfig.
type SimRow struct {
	Config SimConfig
	Runs   int
	// ExactRate is the share of runs naming exactly the right culprits;
	// WrongRate the share of runs blaming at least one wrong commit.
	ExactRate, WrongRate float64
	Builds, Samples      float64 // means per bisection
	Spend                SpendMean
	Bound                float64 // mean log2(candidates)
}

// SimulateRow runs cfg runs times with seeds derived from seed, on
// workers goroutines (at least 1). The result does not depend on workers.
func SimulateRow(cfg SimConfig, runs int, seed uint64, workers int) (SimRow, error) {
	row := SimRow{Config: cfg.withDefaults(), Runs: runs}
	results, err := runSeeds(runs, workers, seed, func(seed uint64) (SimRun, error) { return Simulate(cfg, seed) })
	if err != nil {
		return row, err
	}
	for _, res := range results {
		if res.Exact {
			row.ExactRate++
		}
		if res.WrongBlames > 0 {
			row.WrongRate++
		}
		row.Builds += float64(res.Builds)
		row.Samples += float64(res.Samples)
		row.Spend.add(res.Spend)
		row.Bound += res.Bound
	}
	f := float64(runs)
	row.ExactRate /= f
	row.WrongRate /= f
	row.Builds /= f
	row.Samples /= f
	row.Spend.scale(1 / f)
	row.Bound /= f
	return row, nil
}

// FormatSimTable renders rows as a Markdown table.
func FormatSimTable(rows []SimRow) string {
	var b strings.Builder
	b.WriteString("| commits | culprits | effect | noise | drift | broken stretches | runs | exact culprits | wrong blame | builds | log2(candidates) | samples |\n")
	b.WriteString("|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		c := r.Config
		eff := fmt.Sprintf("%.0f%%", 100*c.Effect)
		if c.Effect == 0 {
			eff = fmt.Sprintf("%.0f–%.0f%%", 100*c.MinEffect, 100*c.MaxEffect)
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s %.0f%% | %s | %d | %d | %.1f%% | %.1f%% | %.1f | %.1f | %.0f |\n",
			c.Commits, c.Culprits, eff, c.Noise, 100*c.Sigma, c.Drift, c.BrokenStretches, r.Runs,
			100*r.ExactRate, 100*r.WrongRate, r.Builds, r.Bound, r.Samples)
	}
	return b.String()
}

// runSeeds runs f for runs seeds derived from seed, on workers goroutines
// (at least 1), and returns the results in seed order: they do not depend
// on workers. The first error, in seed order, is returned.
func runSeeds[T any](runs, workers int, seed uint64, f func(seed uint64) (T, error)) ([]T, error) {
	results := make([]T, runs)
	errs := make([]error, runs)
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				results[r], errs[r] = f(seed*1_000_003 + uint64(r))
			}
		}()
	}
	for r := range runs {
		next <- r
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return results, err
		}
	}
	return results, nil
}
