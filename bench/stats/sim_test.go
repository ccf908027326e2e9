package stats

import (
	"flag"
	"math"
	"os"
	"runtime"
	"testing"
)

var (
	simulate     = flag.Bool("simulate", false, "run the full simulation (32,000 sequential comparisons), check the targets and print the table")
	simulateOut  = flag.String("simulate.out", "", "also write the simulation table to this file")
	simMinEffect = flag.Float64("simulate.mineffect", 0, "simulate with this MinEffect instead of the default (targets are then not checked)")
	simMax       = flag.Int("simulate.max", 0, "simulate with this MaxSamples instead of the default (targets are then not checked)")
	simNullReps  = flag.Int("simulate.nullreps", 0, "A/A comparisons per model and noise (default 2000)")
	simReps      = flag.Int("simulate.reps", 0, "comparisons per model, noise and effect (default 500)")
)

// TestSimulation is the proof of the method: the full seeded simulation with
// the targets of issue 4 as assertions. It takes a few minutes, so it runs
// only with -simulate:
//
//	go test ./bench/stats -run TestSimulation -simulate -simulate.out /tmp/sim.md -v
func TestSimulation(t *testing.T) {
	if !*simulate {
		t.Skip("the full simulation runs with -simulate")
	}
	cfg := SimConfig{
		NullReps:   *simNullReps,
		Reps:       *simReps,
		Thresholds: Thresholds{MinEffect: *simMinEffect, MaxSamples: *simMax},
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
		checkTargets(t, rows)
	}
}

// TestSimulationSmall is a quick seeded run of the same simulation with
// fewer comparisons, so every `go test` checks the method end to end; its
// cells are small, so the bounds allow for their sampling error.
func TestSimulationSmall(t *testing.T) {
	rows := Simulate(SimConfig{NullReps: 150, Reps: 40, Workers: runtime.GOMAXPROCS(0)})
	checkTargets(t, rows)
}

// checkTargets asserts the targets of issue 4 with a budget of 30 samples per
// side, allowing for the sampling error of a finite simulation (rates are
// compared with 2.33 standard errors of slack, about 99% one-sided):
//   - A/A false "different" at most 1%, per cell and over all cells;
//   - at least 95% "different" for a 10% effect at 5% noise and for a 20%
//     effect at 15% noise; the known exception is the bimodal model at 15%
//     noise, where the median itself is unstable (see the README), held to
//     90%;
//   - no wrong-direction verdict for effects of 5% or more; below that, at
//     3% effect and 15% noise, a "different" is a false positive and wrong
//     directions may occur at no more than half the false-positive rate.
func checkTargets(t *testing.T, rows []SimRow) {
	t.Helper()
	within := func(count, runs int, bound float64) bool {
		se := math.Sqrt(bound * (1 - bound) / float64(runs))
		return float64(count)/float64(runs) <= bound+2.33*se
	}
	nullDiff, nullRuns := 0, 0
	for _, r := range rows {
		rate := float64(r.Different) / float64(r.Runs)
		if r.Effect == 0 {
			nullDiff += r.Different
			nullRuns += r.Runs
			if !within(r.Different, r.Runs, 0.01) {
				t.Errorf("%s %g%% noise: A/A false different %.2f%% is above 1%%", r.Model, 100*r.Noise, 100*rate)
			}
			continue
		}
		if r.Effect == 0.10 && r.Noise == 0.05 || r.Effect == 0.20 && r.Noise == 0.15 {
			target := 0.95
			if r.Model == "bimodal" && r.Noise == 0.15 {
				target = 0.90
			}
			if !within(r.Runs-r.Different, r.Runs, 1-target) {
				t.Errorf("%s %g%% noise: power at %g%% effect %.1f%% is below %.0f%%", r.Model, 100*r.Noise, 100*r.Effect, 100*rate, 100*target)
			}
		}
		if r.Effect >= 0.05 && r.Wrong > 0 || !within(r.Wrong, r.Runs, 0.005) {
			t.Errorf("%s %g%% noise %g%% effect: %d wrong-direction verdicts", r.Model, 100*r.Noise, 100*r.Effect, r.Wrong)
		}
	}
	if !within(nullDiff, nullRuns, 0.01) {
		t.Errorf("all A/A: %d of %d false different, above 1%%", nullDiff, nullRuns)
	}
}
