package stats

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	realNoiseFull = flag.Bool("realnoise.full", false, "resample every recording and metric at full size for compare's and a bisection's plans, check the targets and print the table")
	realNoiseGlob = flag.String("realnoise.glob", "../testdata/order-*.tsv", "recordings to resample (the TSV of TestOrderEffect in package bench)")
	realNoiseOut  = flag.String("realnoise.out", "", "also write the real-noise table to this file")
	realNoiseReps = flag.Int("realnoise.reps", 200, "with -realnoise.full: comparisons per recording and effect (A/A: twice as many)")
	realNoiseRaw  = flag.Bool("realnoise.raw", false, "with -realnoise.full: also replay each recording with its sessions' levels kept (the machine's speed jumping between sessions)")
)

// A recording is real A/A samples of one metric: blocks of pairs of runs
// of the same build, each pair taken next to each other in time, each block
// one repetition of the order experiment in measuring order.
type recording struct {
	name   string
	blocks [][][2]float64
}

// readRecordings reads the recordings of every metric of a TSV written by
// bench's TestOrderEffect (columns rep, pos, batch_pos, side, idx, then one
// column per metric; elapsed, the sample's wall time including initdb and
// setup on a new cluster, and load1 are not metrics of a scenario and are
// left out). Within a
// repetition the sides are paired in name order (A with B, C with D) and
// their i-th runs form a pair. A metric with a value that is not positive
// is left out.
func readRecordings(path string) ([]recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return nil, fmt.Errorf("%s: empty file", path)
	}
	header := strings.Split(sc.Text(), "\t")
	if len(header) < 6 || !slices.Equal(header[:5], []string{"rep", "pos", "batch_pos", "side", "idx"}) {
		return nil, fmt.Errorf("%s: header %q is not rep, pos, batch_pos, side, idx, metrics...", path, header)
	}
	type key struct {
		rep, side string
	}
	metrics := header[5:]
	runs := map[key][][]float64{} // by rep and side: per idx, the metric values
	var reps []string
	sidesOf := map[string][]string{}
	for line := 2; sc.Scan(); line++ {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != len(header) {
			return nil, fmt.Errorf("%s:%d: %d fields, want %d", path, line, len(fields), len(header))
		}
		rep, side := fields[0], fields[3]
		idx, err := strconv.Atoi(fields[4])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: idx %q: %w", path, line, fields[4], err)
		}
		vals := make([]float64, len(metrics))
		for i := range metrics {
			if vals[i], err = strconv.ParseFloat(fields[5+i], 64); err != nil {
				return nil, fmt.Errorf("%s:%d: %s %q: %w", path, line, metrics[i], fields[5+i], err)
			}
		}
		k := key{rep, side}
		if !slices.Contains(reps, rep) {
			reps = append(reps, rep)
		}
		if !slices.Contains(sidesOf[rep], side) {
			sidesOf[rep] = append(sidesOf[rep], side)
		}
		for len(runs[k]) <= idx {
			runs[k] = append(runs[k], nil)
		}
		runs[k][idx] = vals
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var out []recording
	for m, name := range metrics {
		if name == "load1" || name == "elapsed" {
			continue
		}
		r := recording{name: fmt.Sprintf("%s %s", strings.TrimSuffix(filepath.Base(path), ".tsv"), name)}
		positive := true
		for _, rep := range reps {
			sides := slices.Sorted(slices.Values(sidesOf[rep]))
			for s := 0; s+1 < len(sides); s += 2 {
				x, y := runs[key{rep, sides[s]}], runs[key{rep, sides[s+1]}]
				var block [][2]float64
				for i := range min(len(x), len(y)) {
					if x[i] == nil || y[i] == nil {
						continue
					}
					block = append(block, [2]float64{x[i][m], y[i][m]})
					positive = positive && x[i][m] > 0 && y[i][m] > 0
				}
				if len(block) > 0 {
					r.blocks = append(r.blocks, block)
				}
			}
		}
		if positive && len(r.blocks) > 0 {
			out = append(out, r)
		}
	}
	return out, nil
}

// scaled returns the recording with each block divided by its median, so
// that the blocks, recorded in separate sessions at different machine
// speeds, differ only in their noise; a comparison runs in one session.
func (rec recording) scaled() recording {
	out := recording{name: rec.name}
	for _, b := range rec.blocks {
		var all []float64
		for _, p := range b {
			all = append(all, p[0], p[1])
		}
		m := medianSorted(sorted(all))
		nb := make([][2]float64, len(b))
		for i, p := range b {
			nb[i] = [2]float64{p[0] / m, p[1] / m}
		}
		out.blocks = append(out.blocks, nb)
	}
	return out
}

// model replays the recording: a comparison's runs are the pairs of a
// random block from a random start, then of further random blocks. Which
// run of a pair goes to A is drawn once per block, since the recorded
// sides are the same build and a comparison must not inherit one
// repetition's accidental side bias as a true difference.
func (rec recording) model() NoiseModel {
	return NoiseModel{
		Name:  rec.name,
		About: "recorded A/A runs, resampled in blocks",
		Stream: func(r *rand.Rand, _ float64) func(int) float64 {
			var block [][2]float64
			pos, swap := 0, 0
			var queue [2][]float64
			next := func() {
				if pos >= len(block) {
					block = rec.blocks[r.IntN(len(rec.blocks))]
					pos, swap = r.IntN(len(block)), r.IntN(2)
				}
				p := block[pos]
				pos++
				queue[0] = append(queue[0], p[swap])
				queue[1] = append(queue[1], p[1-swap])
			}
			return func(side int) float64 {
				if len(queue[side]) == 0 {
					next()
				}
				v := queue[side][0]
				queue[side] = queue[side][1:]
				return v
			}
		},
	}
}

func realNoiseModels(t *testing.T, glob string) []NoiseModel {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings match %q (%v)", glob, err)
	}
	var models []NoiseModel
	for _, f := range files {
		recs, err := readRecordings(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			models = append(models, r.scaled().model())
			if *realNoiseFull && *realNoiseRaw {
				raw := r.model()
				raw.Name += " (session levels kept)"
				models = append(models, raw)
			}
		}
	}
	return models
}

// TestRealNoise resamples the recorded real samples of the order
// experiments with an injected multiplicative change of 1, 1.5 and 2 times
// MinEffect and checks that the false-"same" rate and the coverage of the
// intervals hold under real noise too. In CI it runs small, on one
// recording; the full run covers every recording and metric:
//
//	go test ./bench/stats -run TestRealNoise -realnoise.full -realnoise.out /tmp/real.md -v
func TestRealNoise(t *testing.T) {
	glob, plans, nullReps, reps := "../testdata/order-100k.tsv", []string{"compare"}, 150, 60
	if *realNoiseFull {
		glob, plans, nullReps, reps = *realNoiseGlob, []string{"compare", "bisect"}, 2**realNoiseReps, *realNoiseReps
	}
	models := realNoiseModels(t, glob)
	if !*realNoiseFull {
		models = slices.DeleteFunc(models, func(m NoiseModel) bool { return !strings.HasSuffix(m.Name, " copy") })
	}
	var table strings.Builder
	for _, plan := range plans {
		th := simPlans[plan]
		rows := Simulate(SimConfig{Models: models, Noises: []float64{0}, Effects: []float64{},
			NullReps: nullReps, Reps: reps, Thresholds: th, Workers: runtime.GOMAXPROCS(0)})
		fmt.Fprintf(&table, "\n### %s plan (%s, min effect %g%%, up to %d runs per side)\n\n%s", plan, glob, 100*th.MinEffect, th.WithDefaults().MaxSamples, FormatSimTable(rows))
		covered, runs := 0, 0
		for _, r := range rows {
			within := func(count int, bound float64) bool {
				return float64(count)/float64(r.Runs) <= bound+2.33*math.Sqrt(bound*(1-bound)/float64(r.Runs))
			}
			cell := fmt.Sprintf("%s plan, %s, effect %g%%", plan, r.Model, 100*r.Effect)
			if r.Effect == r.MinEffect && !within(r.FalseSame, shiftLevel(th.Confidence)) ||
				r.Effect == 1.5*r.MinEffect && !within(r.FalseSame, 0.05) || r.Effect == 2*r.MinEffect && !within(r.FalseSame, 0.01) {
				t.Errorf("%s: false same %d of %d", cell, r.FalseSame, r.Runs)
			}
			// The coverage guarantee assumes exchangeable runs; a recording
			// whose sessions carry an order effect can break it. The full
			// run reports such cells and holds the total to the level.
			if conf := th.WithDefaults().Confidence; !within(r.Runs-r.Covered, 1-conf) {
				msg := fmt.Sprintf("%s: interval coverage %d of %d, below %g%%", cell, r.Covered, r.Runs, 100*conf)
				if *realNoiseFull {
					fmt.Fprintf(&table, "\n%s", msg)
				} else {
					t.Error(msg)
				}
			}
			covered += r.Covered
			runs += r.Runs
		}
		if conf := th.WithDefaults().Confidence; float64(covered)/float64(runs) < conf {
			t.Errorf("%s plan: interval coverage %d of %d, below %g%%", plan, covered, runs, 100*conf)
		}
	}
	t.Logf("%s", table.String())
	if *realNoiseOut != "" {
		if err := os.WriteFile(*realNoiseOut, []byte(table.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadRecordings(t *testing.T) {
	recs, err := readRecordings("../testdata/order-4clusters-100k.tsv")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range recs {
		names = append(names, r.name)
	}
	if want := []string{"order-4clusters-100k truncate", "order-4clusters-100k copy", "order-4clusters-100k parse"}; !slices.Equal(names, want) {
		t.Errorf("metrics %q, want %q", names, want)
	}
	// 384 runs in 4 sides: pairs of A with B and C with D.
	pairs := 0
	for _, b := range recs[0].blocks {
		pairs += len(b)
	}
	if pairs != 384/2 {
		t.Errorf("%d pairs, want 192", pairs)
	}
	if _, err := readRecordings("../testdata/pgbench-15.txt"); err == nil || !strings.Contains(err.Error(), "header") {
		t.Errorf("a file of another format: err %v, want one about the header", err)
	}
}
