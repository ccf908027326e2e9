package stats

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

var (
	simulate     = flag.Bool("simulate", false, "run the full simulation (32,000 sequential comparisons), check the targets and print the table")
	simulateOut  = flag.String("simulate.out", "", "also write the simulation table to this file")
	simMinEffect = flag.Float64("simulate.mineffect", 0, "simulate with this MinEffect instead of the default (targets are then not checked)")
	simMax       = flag.Int("simulate.max", 0, "simulate with this MaxSamples instead of the default (targets are then not checked)")
	simNullReps  = flag.Int("simulate.nullreps", 0, "A/A comparisons per model and noise (default 2000)")
	simReps      = flag.Int("simulate.reps", 0, "comparisons per model, noise and effect (default 500)")
	simNoises    = flag.String("simulate.noises", "", "comma-separated relative noise levels (default 0.02,0.05,0.15)")
	simPlan      = flag.String("simulate.plan", "compare", "look schedule: compare, bisect (the bisection's endpoint check and search) or check (its re-verification of a suspect)")
)

// simPlans are the look schedules of the tools: compare uses the package
// defaults; a bisection judges its endpoints and every pair of its search
// with bisect.DefaultThresholds, and re-verifies a suspect with fresh
// samples at alpha 0.01 (bisect's WrongBlame, for one suspect) with twice
// the budget and the batch (bisect.CheckBudget).
var simPlans = map[string]Thresholds{
	"compare": DefaultThresholds,
	"bisect":  {Alpha: 0.05, MinEffect: 0.05, MaxSamples: 60},
	"check":   {Alpha: 0.01, MinEffect: 0.05, MaxSamples: 120, Batch: 10},
}

// TestSimulation is the proof of the method: the full seeded simulation with
// the targets of issue 4 as assertions. It takes a few minutes, so it runs
// only with -simulate:
//
//	go test ./bench/stats -run TestSimulation -simulate -simulate.out /tmp/sim.md -v
func TestSimulation(t *testing.T) {
	if !*simulate {
		t.Skip("the full simulation runs with -simulate")
	}
	th, ok := simPlans[*simPlan]
	if !ok {
		t.Fatalf("-simulate.plan %q: want compare, bisect or check", *simPlan)
	}
	if *simMinEffect != 0 {
		th.MinEffect = *simMinEffect
	}
	if *simMax != 0 {
		th.MaxSamples = *simMax
	}
	var noises []float64
	for _, f := range strings.FieldsFunc(*simNoises, func(r rune) bool { return r == ',' }) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 {
			t.Fatalf("-simulate.noises: %q is not a noise level such as 0.05", f)
		}
		noises = append(noises, v)
	}
	cfg := SimConfig{
		Noises:     noises,
		NullReps:   *simNullReps,
		Reps:       *simReps,
		Thresholds: th,
		Workers:    runtime.GOMAXPROCS(0),
	}
	rows := Simulate(cfg)
	table := FormatSimTable(rows)
	t.Logf("\n%s", table)
	if *simulateOut != "" {
		if err := os.WriteFile(*simulateOut, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if *simMinEffect == 0 && *simMax == 0 {
		checkTargets(t, rows, th)
	}
}

// TestSimulationSmall is a quick seeded run of the same simulation with
// fewer comparisons, for compare's plan and a bisection's, so every
// `go test` checks the method end to end; its cells are small, so the
// bounds allow for their sampling error.
func TestSimulationSmall(t *testing.T) {
	for _, run := range []struct {
		plan   string
		noises []float64
	}{{"compare", []float64{0.05, 0.15}}, {"bisect", []float64{0.05}}} {
		th := simPlans[run.plan]
		rows := Simulate(SimConfig{Noises: run.noises, NullReps: 100, Reps: 30, Thresholds: th, Workers: runtime.GOMAXPROCS(0)})
		checkTargets(t, rows, th)
	}
}

// checkTargets asserts the targets of issues 4 and 22, allowing for the
// sampling error of a finite simulation (rates are compared with 2.33
// standard errors of slack, about 99% one-sided):
//   - A/A false "different" at most Alpha, per cell and over all cells;
//   - false "same" at most (1-Confidence)/2 for a true effect of exactly
//     MinEffect (the guarantee of the equivalence test), at most 5% for
//     1.5×MinEffect and at most 1% for 2×MinEffect, in every cell;
//   - the final interval holds the true ratio in at least Confidence of
//     the comparisons of every cell;
//   - for compare's plan (budget 30 runs per side), at least 95%
//     "different" for a 10% effect at 5% noise and for a 20% effect at 15%
//     noise; the known exception is the bimodal model at 15% noise, where
//     the median itself is unstable (see the README), held to 90%;
//   - wrong-direction verdicts at no more than half of Alpha, and, for
//     compare's plan, none for effects of 5% or more (at 3% effect and 15%
//     noise a "different" is in effect a false positive). With the
//     bisection's Alpha of 0.05 a sample 4 standard errors off can still
//     point the wrong way, rarely (1 of 2,500 at a 5% effect).
func checkTargets(t *testing.T, rows []SimRow, th Thresholds) {
	t.Helper()
	th = th.WithDefaults()
	within := func(count, runs int, bound float64) bool {
		se := math.Sqrt(bound * (1 - bound) / float64(runs))
		return float64(count)/float64(runs) <= bound+2.33*se
	}
	comparePlan := th == DefaultThresholds
	nullDiff, nullRuns := 0, 0
	for _, r := range rows {
		rate := float64(r.Different) / float64(r.Runs)
		cell := fmt.Sprintf("%s %s noise %g%% effect (min effect %g%%)", r.Model, noiseName(r.Noise), 100*r.Effect, 100*r.MinEffect)
		if !within(r.Runs-r.Covered, r.Runs, 1-th.Confidence) {
			t.Errorf("%s: interval coverage %.1f%% is below %g%%", cell, 100*float64(r.Covered)/float64(r.Runs), 100*th.Confidence)
		}
		if r.Effect == r.MinEffect && !within(r.Same, r.Runs, shiftLevel(th.Confidence)) ||
			r.Effect == 1.5*r.MinEffect && !within(r.Same, r.Runs, 0.05) || r.Effect == 2*r.MinEffect && !within(r.Same, r.Runs, 0.01) {
			t.Errorf("%s: false same %.1f%%", cell, 100*float64(r.Same)/float64(r.Runs))
		}
		if r.Effect == 0 {
			nullDiff += r.Different
			nullRuns += r.Runs
			if !within(r.Different, r.Runs, th.Alpha) {
				t.Errorf("%s: A/A false different %.2f%% is above %g%%", cell, 100*rate, 100*th.Alpha)
			}
			continue
		}
		if comparePlan && (r.Effect == 0.10 && r.Noise == 0.05 || r.Effect == 0.20 && r.Noise == 0.15) {
			target := 0.95
			if r.Model == "bimodal" && r.Noise == 0.15 {
				target = 0.90
			}
			if !within(r.Runs-r.Different, r.Runs, 1-target) {
				t.Errorf("%s: power %.1f%% is below %.0f%%", cell, 100*rate, 100*target)
			}
		}
		if comparePlan && r.Effect >= 0.05 && r.Wrong > 0 || !within(r.Wrong, r.Runs, th.Alpha/2) {
			t.Errorf("%s: %d wrong-direction verdicts", cell, r.Wrong)
		}
	}
	if !within(nullDiff, nullRuns, th.Alpha) {
		t.Errorf("all A/A: %d of %d false different, above %g%%", nullDiff, nullRuns, 100*th.Alpha)
	}
}
