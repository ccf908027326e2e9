package bisect

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench/stats"
)

var (
	simTable = flag.String("simtable", "", "run the simulation table and write it as Markdown to this file")
	simRuns  = flag.Int("simruns", 200, "bisections per row of the simulation table")
	simOnly  = flag.String("simrows", "", "comma-separated row numbers (from 1) of the simulation table to run; empty: all")
	simPrev  = flag.Bool("simbefore", false, "run the table with the planner before issue 21 (plan 0, fresh samples only)")
	simSeed  = flag.Uint64("simseed", 0, "added to every row's seed (fresh seeds: 5000)")
	simPlan  = flag.Int("simplan", 0, "run the table with this plan (State.Plan; 0: CurrentPlan)")
)

// simRows are the families of the README's simulation table.
func simRows() []SimConfig {
	var rows []SimConfig
	for _, n := range []string{"normal", "log-normal", "outliers", "bimodal"} {
		rows = append(rows, SimConfig{Commits: 1000, Culprits: 1, Effect: 0.10, Noise: n, BrokenStretches: 3})
	}
	rows = append(rows,
		SimConfig{Commits: 100, Culprits: 1, Effect: 0.10},
		SimConfig{Commits: 5000, Culprits: 1, Effect: 0.10, BrokenStretches: 10},
		SimConfig{Commits: 1000, Culprits: 2, Effect: 0.10, BrokenStretches: 3},
		SimConfig{Commits: 1000, Culprits: 3, Effect: 0.10, BrokenStretches: 3},
		SimConfig{Commits: 1000, Culprits: 2, Noise: "outliers", BrokenStretches: 3}, // 3–30%
		SimConfig{Commits: 1000, Culprits: 1, Effect: 0.03, BrokenStretches: 3},
		SimConfig{Commits: 1000, Culprits: 0, BrokenStretches: 3},
	)
	// A machine whose speed drifts over the bisection: a slow walk, load
	// bursts, both.
	walk := Drift{Walk: 0.05}
	bursts := Drift{Bursts: 2}
	both := Drift{Walk: 0.05, Bursts: 2}
	rows = append(rows,
		SimConfig{Commits: 1000, Culprits: 1, Effect: 0.10, BrokenStretches: 3, Drift: walk},
		SimConfig{Commits: 1000, Culprits: 1, Effect: 0.10, BrokenStretches: 3, Drift: bursts},
		SimConfig{Commits: 1000, Culprits: 1, Effect: 0.10, BrokenStretches: 3, Drift: both},
		SimConfig{Commits: 1000, Culprits: 2, Effect: 0.10, BrokenStretches: 3, Drift: both},
		SimConfig{Commits: 1000, Culprits: 0, BrokenStretches: 3, Drift: both},
	)
	return rows
}

// TestSimulationTable writes the README table:
//
//	go test ./bisect -run TestSimulationTable -simtable /tmp/sim.md -simruns 200 -timeout 2h
func TestSimulationTable(t *testing.T) {
	if *simTable == "" {
		t.Skip("run with -simtable FILE to write the simulation table")
	}
	only := map[int]bool{}
	for _, f := range strings.Split(*simOnly, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			only[n] = true
		}
	}
	var rows []SimRow
	for i, cfg := range simRows() {
		if len(only) > 0 && !only[i+1] {
			continue
		}
		if *simPrev {
			cfg.Plan, cfg.Window = -1, 1
		}
		if *simPlan > 0 {
			cfg.Plan = *simPlan
		}
		row, err := SimulateRow(cfg, *simRuns, uint64(i+1)+*simSeed, runtime.NumCPU())
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
		fmt.Fprint(os.Stderr, FormatSimTable([]SimRow{row}))
		fmt.Fprint(os.Stderr, FormatSpendTable([]SimRow{row}))
	}
	out := fmt.Sprintf("Defaults: search alpha %.2f, min effect %.0f%%, budget %d samples per side (checks %d), wrong-blame bound %.0f%%.\n\n%s",
		DefaultThresholds.Alpha, 100*DefaultThresholds.MinEffect, DefaultThresholds.MaxSamples, CheckBudget*DefaultThresholds.MaxSamples, 1.0, FormatSimTable(rows)) +
		"\nWhere the samples go (means per bisection):\n\n" + FormatSpendTable(rows)
	if err := os.WriteFile(*simTable, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSimulationSmoke keeps the simulation honest in every test run: a
// few seeded bisections of a 10% culprit under 10% noise must name it and
// never blame anything else.
func TestSimulationSmoke(t *testing.T) {
	row, err := SimulateRow(SimConfig{Commits: 200, Culprits: 1, Effect: 0.10, BrokenStretches: 2}, 10, 42, runtime.NumCPU())
	if err != nil {
		t.Fatal(err)
	}
	if row.WrongRate > 0 || row.ExactRate < 0.8 {
		t.Errorf("exact %.0f%%, wrong blames %.0f%% over 10 runs", 100*row.ExactRate, 100*row.WrongRate)
	}
}

// BenchmarkSimulation reports, per simulated bisection of 1,000 commits with
// one 10% culprit under 10% normal noise, the share of exact results, of
// wrong blames, and the builds and samples spent.
func BenchmarkSimulation(b *testing.B) {
	cfg := SimConfig{Commits: 1000, Culprits: 1, Effect: 0.10, BrokenStretches: 3}
	var exact, wrong, builds, samples float64
	for i := 0; i < b.N; i++ {
		r, err := Simulate(cfg, uint64(i))
		if err != nil {
			b.Fatal(err)
		}
		if r.Exact {
			exact++
		}
		if r.WrongBlames > 0 {
			wrong++
		}
		builds += float64(r.Builds)
		samples += float64(r.Samples)
	}
	n := float64(b.N)
	b.ReportMetric(100*exact/n, "%exact")
	b.ReportMetric(100*wrong/n, "%wrong")
	b.ReportMetric(builds/n, "builds/op")
	b.ReportMetric(samples/n, "samples/op")
}

// TestDriftModel checks the simulated machine: seeded, a walk whose
// spread is the one asked for, bursts of the asked size and frequency,
// and a history that does not depend on whether the machine drifts.
func TestDriftModel(t *testing.T) {
	d := Drift{Walk: 0.05, Bursts: 2}
	a, b := newMachine(d, 7), newMachine(d, 7)
	const n = 200_000
	var sum, sumSq float64
	inBurst := 0
	for range n {
		fa, fb := a.next(), b.next()
		if fa != fb {
			t.Fatal("the same seed gives different machines")
		}
		if a.burst > 0 {
			inBurst++
			if a.burst < 0.15 || a.burst > 0.30 {
				t.Fatalf("burst slowdown %.3f outside 15–30%%", a.burst)
			}
		}
		sum += a.logWalk
		sumSq += a.logWalk * a.logWalk
	}
	sd := math.Sqrt(sumSq/n - (sum/n)*(sum/n))
	if sd < 0.04 || sd > 0.06 {
		t.Errorf("walk stddev %.3f, want about 0.05", sd)
	}
	// 2 bursts per 1,000 samples of 60 samples on average: about 11% of
	// the time (the chance of a start is only taken outside a burst).
	if share := float64(inBurst) / n; share < 0.08 || share > 0.14 {
		t.Errorf("%.1f%% of samples in a burst, want about 11%%", 100*share)
	}
	cfg := SimConfig{Commits: 200, Culprits: 2, Effect: 0.10, BrokenStretches: 2}
	_, _, plain, err := simulate(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Drift = d
	_, _, drifting, err := simulate(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plain.Culprits, drifting.Culprits) || !slices.Equal(plain.Level, drifting.Level) {
		t.Error("turning drift on changed the simulated history")
	}
}

// TestSimLabDrawsStatsNoise: a simulated bisection measures with the noise
// models of bench/stats, the ones its simulation of comparisons uses: from
// the same seed, a lab's runs of a commit at level 1 are exactly 100 times
// the model's own draws, for every model, time-dependent ones included.
func TestSimLabDrawsStatsNoise(t *testing.T) {
	h := history(2, nil, nil, nil)
	for _, m := range stats.NoiseModels {
		lab := newSimLab(h, m, 0.10, rand.New(rand.NewPCG(7, 7)))
		want := m.Source(rand.New(rand.NewPCG(7, 7)), 0.10)
		for i := range 500 {
			got, err := lab.Measure(context.Background(), 0)
			if w := 100 * want(0); err != nil || got != w {
				t.Fatalf("%s, run %d: lab measured %v (%v), the model draws %v", m.Name, i, got, err, w)
			}
		}
	}
	if _, err := Simulate(SimConfig{Commits: 10, Noise: "lognormal"}, 1); err == nil || !strings.Contains(err.Error(), "log-normal") {
		t.Errorf("an unknown noise model: %v, want an error listing the models", err)
	}
}

var hintTable = flag.String("hinttable", "", "run the profile-guided search experiment and write it as Markdown to this file")

// hintModels are the profiles of the experiment: none, right most of the
// time, right half the time, and always wrong; each with two more
// commits touching the same files. Each profile costs 6 runs (3 a side),
// counted in the samples.
var hintModels = []SimHints{{}, {Right: 0.8, Others: 2}, {Right: 0.5, Others: 2}, {Right: 0, Others: 3}}

// TestProfileHintTable measures profile-guided search in the simulation
// (docs/bisect.md, "Profile-guided search"):
//
//	go test ./bisect -run TestProfileHintTable -hinttable /tmp/hints.md -simruns 200 -timeout 2h
func TestProfileHintTable(t *testing.T) {
	if *hintTable == "" {
		t.Skip("run with -hinttable FILE to write the profile-guided search table")
	}
	families := []SimConfig{
		{Commits: 1000, Culprits: 1, Effect: 0.10, BrokenStretches: 3},
		{Commits: 1000, Culprits: 2, Effect: 0.10, BrokenStretches: 3},
		{Commits: 100, Culprits: 1, Effect: 0.10},
		// The demo's shape: 30 commits, two culprits, a broken stretch.
		{Commits: 30, Culprits: 2, Effect: 0.10, BrokenStretches: 1},
	}
	var b strings.Builder
	b.WriteString("| commits | culprits | hints: culprit named, other commits | runs | exact culprits | wrong blame | builds | samples |\n|---:|---:|---|---:|---:|---:|---:|---:|\n")
	for i, fam := range families {
		for _, h := range hintModels {
			cfg := fam
			cfg.Hints = h
			row, err := SimulateRow(cfg, *simRuns, uint64(100+i), runtime.NumCPU())
			if err != nil {
				t.Fatal(err)
			}
			model := "none"
			if h.On() {
				model = fmt.Sprintf("%.0f%%, %d", 100*h.Right, h.Others)
			}
			line := fmt.Sprintf("| %d | %d | %s | %d | %.1f%% | %.1f%% | %.1f | %.0f |\n", fam.Commits, fam.Culprits, model, row.Runs,
				100*row.ExactRate, 100*row.WrongRate, row.Builds, row.Samples)
			fmt.Fprint(os.Stderr, line)
			b.WriteString(line)
		}
	}
	if err := os.WriteFile(*hintTable, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHintSplitIsolatesTheHint: a right hint names the culprit with fewer
// builds than plain bisection, a wrong one still names it.
func TestHintSplitIsolatesTheHint(t *testing.T) {
	cfg := SimConfig{Commits: 300, Culprits: 1, Effect: 0.20, Sigma: 0.03}
	plain, _, _, err := simulate(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Hints = SimHints{Right: 1}
	right, s, _, err := simulate(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !plain.Exact || !right.Exact || right.Builds >= plain.Builds || len(s.Hints) != 1 {
		t.Errorf("plain: %+v; right hint %v: %+v", plain, s.Hints, right)
	}
	cfg.Hints = SimHints{Others: 3}
	wrong, s, _, err := simulate(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !wrong.Exact || len(s.Hints) != 3 {
		t.Errorf("wrong hints %v: %+v", s.Hints, wrong)
	}
	t.Logf("builds: plain %d, right hint %d, wrong hints %d; samples %d, %d, %d", plain.Builds, right.Builds, wrong.Builds, plain.Samples, right.Samples, wrong.Samples)
}
