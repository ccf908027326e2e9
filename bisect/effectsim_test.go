package bisect

import (
	"flag"
	"os"
	"runtime"
	"testing"

	"github.com/pgbisect/pgbisect/bench/stats"
)

var effectTable = flag.String("effecttable", "", "run the simulation rows of large effects and instruction counts (issues 30 and 28) and write them as Markdown to this file")

// effectRows are bisections whose comparisons the magnitude path of
// bench/stats can decide early: a +100% culprit, the demo's kind of history
// (40 commits, two culprits of +100% to +300%), and a 1% culprit in
// instruction counts whose runs differ by 0.014%, judged with min effect
// 0.5%; beside them a 10% culprit and a range without one, as references.
func effectRows() []SimConfig {
	return []SimConfig{
		{Commits: 1000, Culprits: 1, Effect: 0.10, BrokenStretches: 3},
		{Commits: 1000, Culprits: 1, Effect: 1.0, BrokenStretches: 3},
		{Commits: 40, Culprits: 2, MinEffect: 1.0, MaxEffect: 3.0},
		{Commits: 40, Culprits: 2, MinEffect: 0.10, MaxEffect: 0.25, Sigma: 0.08},
		{Commits: 1000, Culprits: 0, BrokenStretches: 3},
		{Commits: 1000, Culprits: 1, Effect: 0.01, Sigma: 0.00014, BrokenStretches: 3,
			Thresholds: stats.Thresholds{Alpha: 0.05, MinEffect: 0.005, MaxSamples: 60}},
	}
}

// TestEffectTable writes the rows of effectRows (about a minute on two
// cores at 200 runs a row):
//
//	go test ./bisect -run TestEffectTable -effecttable /tmp/effects.md -simruns 200 -v
func TestEffectTable(t *testing.T) {
	if *effectTable == "" {
		t.Skip("run with -effecttable FILE to write the table")
	}
	var rows []SimRow
	for i, cfg := range effectRows() {
		row, err := SimulateRow(cfg, *simRuns, uint64(i+1)+*simSeed, runtime.NumCPU())
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	out := FormatSimTable(rows) + "\nWhere the samples go (means per bisection):\n\n" + FormatSpendTable(rows)
	if err := os.WriteFile(*effectTable, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}
