package bisect

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// boundSim sets up simulated bisection seed of cfg as simulate does, with
// an engine on the lab's clock, so that a test can stop it, save it and
// continue it.
func boundSim(t *testing.T, cfg SimConfig, seed uint64) (*State, *Engine, *SimHistory) {
	t.Helper()
	cfg = cfg.withDefaults()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	h := NewSimHistory(cfg, rng)
	noise, err := stats.NoiseModelNamed(cfg.Noise)
	if err != nil {
		t.Fatal(err)
	}
	lab := newSimLab(h, noise, cfg.Sigma, rng)
	lab.sampleTime, lab.buildTime = cfg.SampleTime, cfg.BuildTime
	in := Inputs{Repo: "sim", Good: h.Commits[0].Hash, Bad: h.Commits[len(h.Commits)-1].Hash,
		Scenario: "sim", Metric: "elapsed", Direction: stats.LowerIsBetter, Thresholds: cfg.Thresholds}
	s, err := NewState(in, h.Commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	s.MaxTime = cfg.MaxTime
	return s, &Engine{Builder: lab, Measurer: lab, Now: func() time.Time { return lab.clock }}, h
}

// reload is s after a save and a load, as a resume in another process
// sees it.
func reload(t *testing.T, s *State) *State {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out State
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// A bisection stopped at its time bound and continued with a higher one
// ends exactly as the same bisection without a bound: the bound only
// stops the planner, and Spent keeps counting across the save.
func TestTimeBoundStopsAndContinues(t *testing.T) {
	cfg := SimConfig{Commits: 200, Culprits: 1, Effect: 0.10}
	const seed = 7
	full, e, _ := boundSim(t, cfg, seed)
	if err := e.Run(context.Background(), full); err != nil {
		t.Fatal(err)
	}
	if full.Outcome != OutcomeFound || full.Spent == 0 {
		t.Fatalf("unbounded: %s, %s spent", full.Outcome, full.Spent)
	}
	for _, frac := range []float64{0.05, 0.5, 0.9} {
		cfg.MaxTime = time.Duration(frac * float64(full.Spent)).Round(time.Minute)
		s, e, h := boundSim(t, cfg, seed)
		if err := e.Run(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if s.Outcome != OutcomeTimeBound {
			t.Fatalf("bound %s of %s: outcome %s, want %s", cfg.MaxTime, full.Spent, s.Outcome, OutcomeTimeBound)
		}
		if s.Spent > s.MaxTime {
			t.Errorf("bound %s: %s spent", s.MaxTime, s.Spent)
		}
		// The partial answer holds the culprit, and blames nothing else.
		if run := score(s, h); run.WrongBlames > 0 {
			t.Errorf("bound %s: %d wrong blames", s.MaxTime, run.WrongBlames)
		}
		held := false
		for _, c := range s.Culprits {
			held = held || slices.Contains(c.Candidates, h.Culprits[0])
		}
		for _, u := range s.Unresolved {
			held = held || (u.First <= h.Culprits[0] && h.Culprits[0] <= u.Last)
		}
		if s.StoppedIn != PhaseEndpoints && !held {
			t.Errorf("bound %s, stopped in %s: culprit %d in none of culprits %v, ranges %v", s.MaxTime, s.StoppedIn, h.Culprits[0], s.Culprits, s.Unresolved)
		}
		t.Logf("bound %s (%.0f%%): stopped in %s after %d samples: %s", s.MaxTime, 100*frac, s.StoppedIn, s.SamplesTaken, s.Summary)

		// Resumed without a higher bound, it stays stopped.
		s = reload(t, s)
		if s.SetMaxTime(s.MaxTime, time.Time{}) || !s.Done() {
			t.Fatalf("bound %s: the same bound reopened the bisection", s.MaxTime)
		}
		// Raised, it continues to the unbounded bisection's end.
		if !s.SetMaxTime(2*full.Spent, time.Time{}) {
			t.Fatalf("bound %s: raising the bound did not reopen it", s.MaxTime)
		}
		if err := e.Run(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if s.Outcome != full.Outcome || s.SamplesTaken != full.SamplesTaken || s.BuildsDone != full.BuildsDone ||
			s.Spent != full.Spent || s.Summary != full.Summary {
			t.Errorf("bound %s raised: %s, %d samples, %d builds, %s spent: %s\nwant %s, %d samples, %d builds, %s spent: %s", cfg.MaxTime,
				s.Outcome, s.SamplesTaken, s.BuildsDone, s.Spent, s.Summary, full.Outcome, full.SamplesTaken, full.BuildsDone, full.Spent, full.Summary)
		}
	}
}

// Stopped while re-verifying suspects, a bisection blames the culprits
// whose checks confirmed them and names the suspect whose check was not
// finished without blaming it.
func TestTimeBoundInChecks(t *testing.T) {
	cfg := SimConfig{Commits: 200, Culprits: 2, Effect: 0.15}
	s, e, h := boundSim(t, cfg, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.Progress = func(Status) {
		if s.Phase == PhaseCheck && len(s.Checks) == 2 && s.Checks[0].Verdict != VerdictPending {
			cancel()
		}
	}
	if err := e.Run(ctx, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("want the run cancelled in the checks, got %v (%s, %d checks)", err, s.Phase, len(s.Checks))
	}
	s.MaxTime = s.Spent
	if act := s.Next(time.Time{}); act.Kind != ActDone || s.Outcome != OutcomeTimeBound || s.StoppedIn != PhaseCheck {
		t.Fatalf("past the bound: action %v, outcome %s, stopped in %s", act.Kind, s.Outcome, s.StoppedIn)
	}
	if len(s.Culprits) != 1 || !slices.Contains(h.Culprits, s.Culprits[0].Candidates[0]) {
		t.Errorf("culprits %+v, want the one confirmed of %v", s.Culprits, h.Culprits)
	}
	if len(s.Unresolved) != 1 || !slices.Contains(h.Culprits, s.Unresolved[0].Last) {
		t.Errorf("unresolved %+v, want the suspect whose check was not finished", s.Unresolved)
	}
	t.Log(s.Summary)
}

// The estimate at the start of a bisection brackets what it then takes,
// in most simulated bisections, and is zero once it is done.
func TestEstimate(t *testing.T) {
	cfg := SimConfig{Commits: 1000, Culprits: 1, Effect: 0.10, BrokenStretches: 3}
	within, runs := 0, 20
	var lo, hi, took int
	var midLeft [][4]int
	for seed := range uint64(runs) {
		s, e, _ := boundSim(t, cfg, 100+seed)
		// After the endpoints' first look: the mean sample is known.
		var at Estimate
		var samplesAt int
		e.Progress = func(Status) {
			if s.SamplesTaken == 2*s.Inputs.Thresholds.StartSamples {
				at, samplesAt = s.Estimate(), s.SamplesTaken
			}
			if s.SamplesTaken == 400 {
				mid := s.Estimate()
				left := &midLeft[len(midLeft)-1]
				left[0], left[1], left[2] = mid.SamplesLo, mid.SamplesHi, s.SamplesTaken
			}
		}
		midLeft = append(midLeft, [4]int{})
		if err := e.Run(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if at.PerSample != time.Minute || at.Builds != splitsLeft(s.CandidateCount()) {
			t.Fatalf("seed %d: estimate %+v: want a minute per sample and %d builds", seed, at, splitsLeft(s.CandidateCount()))
		}
		left := s.SamplesTaken - samplesAt
		midLeft[len(midLeft)-1][3] = s.SamplesTaken
		lo, hi, took = lo+at.SamplesLo, hi+at.SamplesHi, took+left
		if at.SamplesLo <= left && left <= at.SamplesHi {
			within++
		}
		if end := s.Estimate(); end.SamplesHi != 0 || end.Builds != 0 {
			t.Errorf("seed %d: done, but %d samples and %d builds estimated", seed, end.SamplesHi, end.Builds)
		}
	}
	midWithin, midN := 0, 0
	for _, m := range midLeft {
		if m[2] > 0 {
			midN++
			if left := m[3] - m[2]; m[0] <= left && left <= m[1] {
				midWithin++
			}
		}
	}
	t.Logf("after 400 samples: within in %d of %d", midWithin, midN)
	t.Logf("samples left within the estimate after the first look: %d of %d (means: estimated %d–%d, took %d)", within, runs, lo/runs, hi/runs, took/runs)
	if within < runs/2 || midWithin < midN/2 {
		t.Errorf("samples left within the estimate in %d of %d bisections at the start and %d of %d after 400 samples, want half or more", within, runs, midWithin, midN)
	}
}

// In the simulation a time bound never makes a wrong blame; the share of
// partial answers whose narrowed ranges hold the culprits is logged.
func TestTimeBoundSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("simulation")
	}
	for _, cfg := range []SimConfig{
		{Commits: 1000, Culprits: 1, Effect: 0.10, BrokenStretches: 3, MaxTime: 12 * time.Hour},
		{Commits: 1000, Culprits: 2, Effect: 0.10, BrokenStretches: 3, MaxTime: 20 * time.Hour},
		{Commits: 1000, Culprits: 0, BrokenStretches: 3, MaxTime: 3 * time.Hour},
	} {
		runs, stopped, held, wrong, spent := 30, 0, 0, 0, time.Duration(0)
		for seed := range uint64(runs) {
			s, e, h := boundSim(t, cfg, 1000+seed)
			if err := e.Run(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			spent += s.Spent
			if s.Spent > s.MaxTime {
				t.Errorf("%d culprits, seed %d: %s spent past the bound %s", cfg.Culprits, seed, s.Spent, s.MaxTime)
			}
			run := score(s, h)
			if run.WrongBlames > 0 {
				wrong++
			}
			if s.Outcome != OutcomeTimeBound {
				continue
			}
			stopped++
			all := true
			for _, c := range h.Culprits {
				in := false
				for _, x := range s.Culprits {
					in = in || slices.Contains(x.Candidates, c)
				}
				for _, u := range append(slices.Clone(s.Unresolved), s.Unjudged...) {
					in = in || (u.First <= c && c <= u.Last)
				}
				all = all && in
			}
			if all {
				held++
			}
		}
		t.Logf("%d culprits, bound %s: %d of %d stopped at the bound, %d of them with every culprit in a culprit or range named, %d wrong blames; mean %s spent",
			cfg.Culprits, cfg.MaxTime, stopped, runs, held, wrong, (spent / time.Duration(runs)).Round(time.Minute))
		if wrong > 0 {
			t.Errorf("%d culprits: %d runs blamed a wrong commit", cfg.Culprits, wrong)
		}
	}
}

// The start line says the budget and what is left; a progress line says
// the time left once a sample has been timed, and the bound.
func TestBudgetLines(t *testing.T) {
	s, e, _ := boundSim(t, SimConfig{Commits: 100, Culprits: 1, Effect: 0.10, MaxTime: 10 * time.Hour}, 1)
	start := s.Budget()
	for _, want := range []string{"budget: up to 60 samples per side per comparison, 120 per check; estimated ", " samples and 7 builds left (times once the first sample is taken); time bound 10h0m0s, 0s spent"} {
		if !strings.Contains(start, want) {
			t.Errorf("start line %q lacks %q", start, want)
		}
	}
	var line string
	e.Progress = func(st Status) {
		if s.SamplesTaken == 12 {
			line = st.String()
		}
	}
	if err := e.Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(line, "left (bound 10h0m0s, 18m0s spent)") || !strings.Contains(line, ", about ") {
		t.Errorf("progress line %q: want the time left and the bound", line)
	}
}

// TestBoundCountsTheGuide: the profile of the endpoints costs about
// 2*DefaultGuideRuns samples, and is not started when they would end past
// the time bound.
func TestBoundCountsTheGuide(t *testing.T) {
	h := history(12, nil, map[int]float64{7: 0.3}, nil)
	s, err := NewState(Inputs{Repo: "test", Good: h.Commits[0].Hash, Bad: h.Commits[11].Hash, Metric: "elapsed",
		Direction: stats.LowerIsBetter, Thresholds: testThresholds}, h.Commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	bad := len(s.Commits) - 1
	s.Builds[s.Commits[bad].Key] = &BuildResult{Hash: s.Commits[bad].Hash}
	s.SamplesTaken, s.MeasureTime = 10, 10*time.Second // 1 s a sample
	s.MaxTime = 100 * time.Second
	guide := Action{Kind: ActGuide, Commit: bad, Pair: -1, Check: -1}
	for spent, want := range map[time.Duration]bool{90 * time.Second: false, 95 * time.Second: true} {
		s.Spent = spent
		if got := s.pastBound(guide); got != want {
			t.Errorf("%s spent of 100 s: the guide (%d runs of 1 s) past the bound %v, want %v", spent, 2*DefaultGuideRuns, got, want)
		}
	}
}
