package stats

import (
	"flag"
	"os"
	"runtime"
	"testing"
)

var (
	simulate    = flag.Bool("simulate", false, "run the full simulation (32,000 sequential comparisons), check the targets and print the table")
	simulateOut = flag.String("simulate.out", "", "also write the simulation table to this file")
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
	rows := Simulate(SimConfig{Workers: runtime.GOMAXPROCS(0)})
	table := FormatSimTable(rows)
	t.Logf("\n%s", table)
	if *simulateOut != "" {
		if err := os.WriteFile(*simulateOut, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	checkTargets(t, rows)
}

// TestSimulationSmall is a quick seeded run of the same simulation with
// fewer comparisons, so every `go test` checks the targets that a small run
// can resolve.
func TestSimulationSmall(t *testing.T) {
	rows := Simulate(SimConfig{NullReps: 150, Reps: 40, Workers: runtime.GOMAXPROCS(0)})
	checkTargets(t, rows)
}

// checkTargets asserts the targets of issue 4 with a budget of 30 samples per
// side: A/A false "different" at most 1%; at least 95% "different" for a 10%
// effect at 5% noise and for a 20% effect at 15% noise; never a
// wrong-direction verdict.
func checkTargets(t *testing.T, rows []SimRow) {
	t.Helper()
	for _, r := range rows {
		rate := float64(r.Different) / float64(r.Runs)
		switch {
		case r.Effect == 0 && rate > 0.01:
			t.Errorf("%s %g%% noise: A/A false different %.2f%% > 1%%", r.Model, 100*r.Noise, 100*rate)
		case r.Effect == 0.10 && r.Noise == 0.05 && rate < 0.95,
			r.Effect == 0.20 && r.Noise == 0.15 && rate < 0.95:
			t.Errorf("%s %g%% noise: power at %g%% effect %.1f%% < 95%%", r.Model, 100*r.Noise, 100*r.Effect, 100*rate)
		}
		if r.Effect > 0 && r.Wrong > 0 {
			t.Errorf("%s %g%% noise %g%% effect: %d wrong-direction verdicts", r.Model, 100*r.Noise, 100*r.Effect, r.Wrong)
		}
	}
}
