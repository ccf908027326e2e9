package bench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	mstats "github.com/aclements/go-moremath/stats"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// The order experiment: a comparison of two targets run exactly as compare
// samples it (Interleave in batches, a new Runner per repetition),
// recording where each sample sat in the sequence. It shows whether a
// sample's position (first on its cluster, first of a batch, side A or B)
// moves its value. Off by default; it takes about 40 s per repetition at
// the default size (docs/scenarios.md has the results):
//
//	go test ./bench -run 'TestOrderEffect$' -v -args -order.reps 16 -order.out /tmp/order.tsv
//
// Any shipped scenario and point can be studied (-order.scenario,
// -order.set, -order.point), A/A with one build or A/B with two
// (-order.bin2), in the fixed order of old samplers (-order.seed 0) or in
// seeded random A B B A blocks. The TSV's columns keep copy-single's names
// for every scenario: "truncate" is the first workload step's time (from
// the progress lines), "copy" and "parse" the first and second metric of
// -order.metrics.
var (
	orderReps     = flag.Int("order.reps", 0, "TestOrderEffect: repetitions, each a new Runner with new clusters (0 skips the experiment)")
	orderSamples  = flag.Int("order.samples", 10, "TestOrderEffect: samples per side and repetition")
	orderTargets  = flag.Int("order.targets", 2, "TestOrderEffect: targets (clusters), named A, B, C, ...")
	orderBatch    = flag.Int("order.batch", 5, "TestOrderEffect: samples per side per Interleave call, as compare's batches")
	orderScenario = flag.String("order.scenario", "copy-single", "TestOrderEffect: a scenario of configs/scenarios (name or file)")
	orderSet      = flag.String("order.set", "rows=100000", "TestOrderEffect: scenario variables, var=value,var=value")
	orderPoint    = flag.String("order.point", "", "TestOrderEffect: the matrix point (default the first)")
	orderMetrics  = flag.String("order.metrics", "", "TestOrderEffect: the two metrics recorded as the copy and parse columns (default the scenario's first two)")
	orderBin2     = flag.String("order.bin2", "", "TestOrderEffect: bin directory of side B (and of every other target but A): an A/B study; default A's build (A/A)")
	orderBin      = flag.String("order.bin", "", "TestOrderEffect: bin directory of side A and of the client tools (default PGBISECT_TEST_PGBIN or Debian's PostgreSQL 15)")
	orderClient   = flag.String("order.client", "", "TestOrderEffect: bin directory of the client tools (default side A's, as compare)")
	orderSeed     = flag.Uint64("order.seed", 0, "TestOrderEffect: 0 samples A B B A A B (side A starts every block, the old order); N > 0 seeds random blocks (bench.Order), N+rep per repetition")
	orderNoSync   = flag.Bool("order.nosync", false, "TestOrderEffect: no sync before each sample (how samplers ran before it)")
	orderOut      = flag.String("order.out", "", "TestOrderEffect: write every sample as TSV to this file")
	orderIn       = flag.String("order.in", "", "TestOrderEffect: only analyze this TSV of an earlier run (-order.out)")
)

// orderRow is one sample of the order experiment.
type orderRow struct {
	rep, pos, batchPos int
	side               string
	idx                int                // the sample's index on its side (0 = first on its cluster)
	elapsed            float64            // the whole sample: initdb and setup too on a new cluster
	steps              map[string]float64 // truncate: the first workload step (s); copy, parse: the two metrics
	load1              float64
	after              string // the side of the sample just before, in its repetition ("" for the first)
}

// stepTimes collects "workload i/n: step done in Xs" progress lines.
type stepTimes struct {
	mu    sync.Mutex
	steps map[string]float64
}

var doneLine = regexp.MustCompile(`workload \d+/\d+: (\S+) done in ([0-9.]+)s`)

func (w *stepTimes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sc := bufio.NewScanner(strings.NewReader(string(p)))
	for sc.Scan() {
		if m := doneLine.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			w.steps[m[1]] = v
		}
	}
	return len(p), nil
}

func (w *stepTimes) take() map[string]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.steps
	w.steps = map[string]float64{}
	return s
}

func TestOrderEffect(t *testing.T) {
	if *orderIn != "" {
		rows, err := readOrderTSV(*orderIn)
		if err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + orderReport(rows))
		return
	}
	if *orderReps == 0 {
		t.Skip("the order experiment runs only with -order.reps N (or -order.in FILE)")
	}
	bin := *orderBin
	if bin == "" {
		bin = pgBin(t)
	}
	bin2 := *orderBin2
	if bin2 == "" {
		bin2 = bin
	}
	file := *orderScenario
	if !strings.Contains(file, "/") {
		file = "../configs/scenarios/" + strings.TrimSuffix(file, ".yaml") + ".yaml"
	}
	sets := map[string]string{}
	for _, kv := range strings.Split(*orderSet, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			sets[k] = v
		}
	}
	sc, err := LoadFileWith(file, sets)
	if err != nil {
		t.Fatal(err)
	}
	pt := sc.Points()[0]
	if *orderPoint != "" {
		if pt, err = sc.FindPoint(*orderPoint); err != nil {
			t.Fatal(err)
		}
	}
	var metrics []string
	if *orderMetrics != "" {
		metrics = strings.Split(*orderMetrics, ",")
	} else {
		for _, m := range sc.MetricSpecs() {
			metrics = append(metrics, m.Name)
		}
	}
	if len(metrics) < 2 {
		metrics = append(metrics, metrics[0])
	}
	first := sc.Workload[0].Name
	var out io.Writer = io.Discard
	if *orderOut != "" {
		f, err := os.Create(*orderOut)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		out = f
	}
	t.Logf("%s %s, columns: truncate = step %s, copy = %s, parse = %s; A %s, B %s", sc.Name, pt, first, metrics[0], metrics[1], bin, bin2)
	fmt.Fprintln(out, "rep\tpos\tbatch_pos\tside\tidx\telapsed\ttruncate\tcopy\tparse\tload1")
	var targets []Target
	for i := 0; i < *orderTargets; i++ {
		b := bin2
		if i == 0 {
			b = bin
		}
		targets = append(targets, Target{Name: string(rune('A' + i)), BinDir: b})
	}
	var rows []orderRow
	for rep := 0; rep < *orderReps; rep++ {
		r, _ := newTestRunner(t)
		r.ClientBin = bin
		r.noSync = *orderNoSync
		if *orderClient != "" {
			r.ClientBin = *orderClient
		}
		t.Cleanup(func() { r.Close(context.Background()) })
		st := &stepTimes{steps: map[string]float64{}}
		r.Progress = st
		order := Order{Targets: len(targets)}
		if *orderSeed != 0 {
			order.Seed = stats.Mix64(*orderSeed + uint64(rep))
		}
		pos, perSide := 0, map[string]int{}
		if err := r.Check(context.Background(), sc, targets, pt); err != nil {
			t.Fatal(err)
		}
		batchPos := 0
		loop := &Loop{Scenario: sc, Point: pt, Targets: targets, Order: order, First: min(*orderBatch, *orderSamples),
			Before: func(_, k, _ int) { batchPos = k },
			Next:   func(n int) (int, error) { return min(*orderBatch, *orderSamples-n), nil },
			After: func(_ int, s *Sample) error {
				steps := st.take()
				row := orderRow{rep: rep, pos: pos, batchPos: batchPos, side: s.Target, idx: perSide[s.Target],
					elapsed: s.Elapsed.Seconds(), load1: s.Env.LoadAvg[0],
					// The metrics at full precision (progress lines round to 10 ms).
					steps: map[string]float64{"truncate": steps[first], "copy": s.Values[metrics[0]], "parse": s.Values[metrics[1]]}}
				pos++
				perSide[s.Target]++
				rows = append(rows, row)
				fmt.Fprintf(out, "%d\t%d\t%d\t%s\t%d\t%.4f\t%.2f\t%.5f\t%.5f\t%.2f\n", row.rep, row.pos, row.batchPos, row.side, row.idx,
					row.elapsed, row.steps["truncate"], row.steps["copy"], row.steps["parse"], row.load1)
				return nil
			}}
		if _, err := loop.Run(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		r.Close(context.Background())
		t.Logf("repetition %d of %d done", rep+1, *orderReps)
	}
	t.Log("\n" + orderReport(rows))
}

// readOrderTSV reads the rows an earlier run wrote with -order.out.
func readOrderTSV(file string) ([]orderRow, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var rows []orderRow
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if i == 0 {
			continue // header
		}
		f := strings.Split(line, "\t")
		if len(f) != 10 {
			return nil, fmt.Errorf("%s:%d: %d fields, want 10", file, i+1, len(f))
		}
		r := orderRow{side: f[3], steps: map[string]float64{}}
		r.rep, _ = strconv.Atoi(f[0])
		r.pos, _ = strconv.Atoi(f[1])
		r.batchPos, _ = strconv.Atoi(f[2])
		r.idx, _ = strconv.Atoi(f[4])
		r.elapsed, _ = strconv.ParseFloat(f[5], 64)
		for j, k := range []string{"truncate", "copy", "parse"} {
			r.steps[k], _ = strconv.ParseFloat(f[6+j], 64)
		}
		r.load1, _ = strconv.ParseFloat(f[9], 64)
		rows = append(rows, r)
	}
	return rows, nil
}

// orderReport summarizes the experiment. Values are divided by the median
// of their repetition (both sides), so that a repetition run while the
// machine was busier does not weigh more than another.
func orderReport(rows []orderRow) string {
	var b strings.Builder
	reps := map[int][]orderRow{}
	var ids []int
	for _, r := range rows {
		if _, ok := reps[r.rep]; !ok {
			ids = append(ids, r.rep)
		}
		reps[r.rep] = append(reps[r.rep], r)
	}
	prev := map[[2]int]string{}
	for _, r := range rows {
		prev[[2]int{r.rep, r.pos}] = r.side
	}
	for i := range rows {
		rows[i].after = prev[[2]int{rows[i].rep, rows[i].pos - 1}]
	}
	load := make([]float64, len(rows))
	var sides []string
	for i, r := range rows {
		load[i] = r.load1
		if !slices.Contains(sides, r.side) {
			sides = append(sides, r.side)
		}
	}
	slices.Sort(sides)
	fmt.Fprintf(&b, "%d samples in %d repetitions, load average median %.2f\n", len(rows), len(ids), orderMedian(load))
	for _, m := range []string{"copy", "parse"} {
		val := func(r orderRow) float64 { return r.steps[m] }
		repMedian := map[int]float64{}
		var spread []float64
		for _, id := range ids {
			v := orderValues(reps[id], val, nil)
			repMedian[id] = orderMedian(v)
			spread = append(spread, orderStddev(v)/repMedian[id])
		}
		norm := func(r orderRow) float64 { return val(r) / repMedian[r.rep] }
		fmt.Fprintf(&b, "%s: median %.4f s, relative stddev within a repetition %.2f (median over repetitions)\n",
			m, orderMedian(orderValues(rows, val, nil)), orderMedian(spread))

		// A cluster's first sample against its later ones, per repetition
		// and side.
		var firsts []float64
		above := 0
		for _, id := range ids {
			for _, side := range sides {
				first := orderValues(reps[id], val, func(r orderRow) bool { return r.side == side && r.idx == 0 })
				later := orderValues(reps[id], val, func(r orderRow) bool { return r.side == side && r.idx > 0 })
				if len(first) == 1 && len(later) > 0 {
					f := first[0] / orderMedian(later)
					firsts = append(firsts, f)
					if f > 1 {
						above++
					}
				}
			}
		}
		fmt.Fprintf(&b, "  first sample of a cluster / median of its later ones: geomean %.3f, %d of %d above 1\n",
			orderGeomean(firsts), above, len(firsts))
		for _, c := range []struct {
			name string
			x, y func(orderRow) bool
		}{
			{"first sample of a cluster vs later", func(r orderRow) bool { return r.idx == 0 }, func(r orderRow) bool { return r.idx > 0 }},
			{"side A vs side B", func(r orderRow) bool { return r.side == "A" }, func(r orderRow) bool { return r.side == "B" }},
			{"side A vs side B, first samples left out", func(r orderRow) bool { return r.side == "A" && r.idx > 0 }, func(r orderRow) bool { return r.side == "B" && r.idx > 0 }},
			{"first of a batch vs the rest", func(r orderRow) bool { return r.batchPos == 0 }, func(r orderRow) bool { return r.batchPos > 0 }},
			{"after its own side vs after the other", func(r orderRow) bool { return r.after == r.side }, func(r orderRow) bool { return r.after != "" && r.after != r.side }},
			{"side A after B vs side B after A", func(r orderRow) bool { return r.side == "A" && r.after == "B" }, func(r orderRow) bool { return r.side == "B" && r.after == "A" }},
		} {
			x, y := orderValues(rows, norm, c.x), orderValues(rows, norm, c.y)
			p := math.NaN()
			if res, err := mstats.MannWhitneyUTest(x, y, mstats.LocationDiffers); err == nil {
				p = res.P
			}
			fmt.Fprintf(&b, "  %-42s n %3d+%3d: %.3f vs %.3f of the repetition median, Mann-Whitney p %.3f\n", c.name, len(x), len(y), orderMedian(x), orderMedian(y), p)
		}
		var byIdx, byPos []string
		for i := 0; ; i++ {
			v := orderValues(rows, norm, func(r orderRow) bool { return r.idx == i })
			if len(v) == 0 {
				break
			}
			byIdx = append(byIdx, fmt.Sprintf("%.2f", orderMedian(v)))
		}
		for i := 0; ; i++ {
			v := orderValues(rows, norm, func(r orderRow) bool { return r.pos == i })
			if len(v) == 0 {
				break
			}
			byPos = append(byPos, fmt.Sprintf("%.2f", orderMedian(v)))
		}
		fmt.Fprintf(&b, "  by index on its side: %s\n  by position in the sequence: %s\n", strings.Join(byIdx, " "), strings.Join(byPos, " "))

		// A cluster with a speed of its own (kept for all its samples) would
		// spread the clusters' medians wider than random relabellings of
		// the samples within each repetition do.
		rng := rand.New(rand.NewPCG(1, 2))
		clusterSpread := func(relabel bool) float64 {
			sum := 0.0
			for _, id := range ids {
				rs := reps[id]
				labels := make([]string, len(rs))
				for i, r := range rs {
					labels[i] = r.side
				}
				if relabel {
					rng.Shuffle(len(labels), func(i, j int) { labels[i], labels[j] = labels[j], labels[i] })
				}
				var logMeds []float64
				for _, side := range sides {
					var v []float64
					for i, r := range rs {
						if labels[i] == side {
							v = append(v, val(r))
						}
					}
					logMeds = append(logMeds, math.Log(orderMedian(v)))
				}
				sd := orderStddev(logMeds)
				sum += sd * sd
			}
			return math.Sqrt(sum / float64(len(ids)))
		}
		obsSpread, wider, relabelled := clusterSpread(false), 0, 0.0
		const relabellings = 1000
		for k := 0; k < relabellings; k++ {
			s := clusterSpread(true)
			relabelled += s * s / relabellings
			if s >= obsSpread {
				wider++
			}
		}
		fmt.Fprintf(&b, "  stddev of log(cluster median) within a repetition: %.3f; relabelled at random %.3f; share of relabellings as wide %.3f\n",
			obsSpread, math.Sqrt(relabelled), float64(wider)/relabellings)
		if !slices.Contains(sides, "A") || !slices.Contains(sides, "B") {
			continue
		}

		// The A/B ratio of medians per repetition, what compare reports.
		var ratios []string
		for _, id := range ids {
			a := orderValues(reps[id], val, func(r orderRow) bool { return r.side == "A" })
			bb := orderValues(reps[id], val, func(r orderRow) bool { return r.side == "B" })
			ratios = append(ratios, fmt.Sprintf("%.2f", orderMedian(a)/orderMedian(bb)))
		}
		fmt.Fprintf(&b, "  A/B ratio of medians per repetition: %s\n", strings.Join(ratios, " "))

		// What compare would have decided on each repetition: the first
		// look at FirstLook per side, then StartSamples, then batches while unknown.
		for _, alpha := range []float64{0.05, 0.01} {
			th := stats.DefaultThresholds
			th.Alpha = alpha
			counts := map[string]int{}
			var decided []string
			for _, id := range ids {
				a := orderValues(reps[id], val, func(r orderRow) bool { return r.side == "A" })
				bb := orderValues(reps[id], val, func(r orderRow) bool { return r.side == "B" })
				th.MaxSamples = min(len(a), len(bb))
				var c stats.Comparison
				for n := th.FirstLook(); n <= th.MaxSamples; {
					c = stats.Compare(a[:n], bb[:n], stats.LowerIsBetter, th)
					more := th.More(c)
					if more == 0 {
						break
					}
					n += more
				}
				counts[c.Verdict.String()]++
				if c.Verdict.Different() {
					decided = append(decided, fmt.Sprintf("%s %.2fx p %.3f", c.Verdict, c.Ratio, c.P))
				}
			}
			fmt.Fprintf(&b, "  compare at alpha %.2f: %v %s\n", alpha, counts, strings.Join(decided, ", "))
		}
	}
	return b.String()
}

// orderValues returns f of the rows that keep selects (all when nil), in
// their order.
func orderValues(rows []orderRow, f func(orderRow) float64, keep func(orderRow) bool) []float64 {
	var v []float64
	for _, r := range rows {
		if keep == nil || keep(r) {
			v = append(v, f(r))
		}
	}
	return v
}

func orderMedian(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	switch {
	case n == 0:
		return math.NaN()
	case n%2 == 1:
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func orderStddev(v []float64) float64 {
	mean := 0.0
	for _, x := range v {
		mean += x / float64(len(v))
	}
	ss := 0.0
	for _, x := range v {
		ss += (x - mean) * (x - mean)
	}
	return math.Sqrt(ss / float64(len(v)-1))
}

func orderGeomean(v []float64) float64 {
	sum := 0.0
	for _, x := range v {
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(v)))
}
