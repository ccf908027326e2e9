package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
)

// A NoiseModel draws one measurement of a benchmark whose true median is
// near 1, with relative noise about s (a fraction).
type NoiseModel struct {
	Name string
	// About says how the model is built, for the table's legend.
	About string
	Draw  func(r *rand.Rand, s float64) float64
}

// NoiseModels are the models Simulate uses by default, chosen from what
// PostgreSQL benchmarks show: symmetric run-to-run noise, a right-skewed
// time distribution, occasional much slower runs (a checkpoint or cache
// eviction landing in one run), and two distinct states a fresh server can
// settle in (huge pages, NUMA placement).
var NoiseModels = []NoiseModel{
	{
		Name:  "normal",
		About: "1 + s·Z",
		Draw:  func(r *rand.Rand, s float64) float64 { return 1 + s*r.NormFloat64() },
	},
	{
		Name:  "log-normal",
		About: "exp(σZ) with σ = √ln(1+s²), so the relative stddev is s",
		Draw: func(r *rand.Rand, s float64) float64 {
			return math.Exp(math.Sqrt(math.Log1p(s*s)) * r.NormFloat64())
		},
	},
	{
		Name:  "outliers",
		About: "1 + b·Z, and 5% of runs slower by 2s to 4s; b = 0.745s so the total relative stddev is s",
		Draw: func(r *rand.Rand, s float64) float64 {
			// The outliers have variance 0.05·E[(2+2U)²] - (0.05·3)² =
			// 0.444 (in units of s²); the bulk gets the rest.
			x := 1 + math.Sqrt(1-0.4444)*s*r.NormFloat64()
			if r.Float64() < 0.05 {
				x += s * (2 + 2*r.Float64())
			}
			return x
		},
	},
	{
		Name:  "bimodal",
		About: "70% of runs in a fast mode, 30% in a slow mode 3.8 within-mode stddevs away; total relative stddev s",
		Draw: func(r *rand.Rand, s float64) float64 {
			// Within-mode stddev w and mode distance d with
			// w² + 0.3·0.7·d² = s² and the mean at 1.
			w := 0.5 * s
			d := math.Sqrt(0.75/0.21) * s
			x := 1 + w*r.NormFloat64()
			if r.Float64() < 0.3 {
				return x + 0.7*d
			}
			return x - 0.3*d
		},
	},
}

// SimConfig configures Simulate. Zero fields take the defaults in brackets.
type SimConfig struct {
	Models     []NoiseModel // [NoiseModels]
	Noises     []float64    // relative noise levels [0.05, 0.15]
	Effects    []float64    // true relative changes of the median, > 0 [0.03, 0.05, 0.10, 0.20]
	NullReps   int          // A/A comparisons per model and noise [2000]
	Reps       int          // comparisons per model, noise and effect [500]
	Thresholds Thresholds   // [DefaultThresholds]
	Seed       uint64       // [1]
	Workers    int          // goroutines [1]
}

// SimRow is the outcome of the comparisons of one cell: one noise model at
// one noise level and one true effect (0 for A/A).
type SimRow struct {
	Model  string
	Noise  float64
	Effect float64
	Runs   int
	// Different counts Regression or Improvement verdicts; Wrong counts
	// those whose direction contradicts the truth (every Different is wrong
	// when Effect is 0).
	Different, Wrong, Same, Inconclusive int
	// MeanSamples is the mean number of runs per side when the comparison
	// stopped.
	MeanSamples float64
	// RelStddev is the mean relative stddev of the baseline samples as
	// measured, to show how noisy the model really is.
	RelStddev float64
}

// Simulate runs seeded sequential comparisons exactly as a sampler would:
// StartSamples per side, then Batch more per side while Thresholds.More
// asks, up to MaxSamples. Half the comparisons use LowerIsBetter and half
// HigherIsBetter, and half make B larger by 1+effect while half make it
// smaller by the same factor, so both directions are tested. The result
// depends only on cfg, not on Workers.
func Simulate(cfg SimConfig) []SimRow {
	if cfg.Models == nil {
		cfg.Models = NoiseModels
	}
	if cfg.Noises == nil {
		cfg.Noises = []float64{0.05, 0.15}
	}
	if cfg.Effects == nil {
		cfg.Effects = []float64{0.03, 0.05, 0.10, 0.20}
	}
	if cfg.NullReps <= 0 {
		cfg.NullReps = 2000
	}
	if cfg.Reps <= 0 {
		cfg.Reps = 500
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	cfg.Workers = max(cfg.Workers, 1)
	th := cfg.Thresholds.WithDefaults()

	var rows []SimRow
	for _, m := range cfg.Models {
		for _, s := range cfg.Noises {
			rows = append(rows, SimRow{Model: m.Name, Noise: s, Runs: cfg.NullReps})
			for _, e := range cfg.Effects {
				rows = append(rows, SimRow{Model: m.Name, Noise: s, Effect: e, Runs: cfg.Reps})
			}
		}
	}
	models := make(map[string]NoiseModel)
	for _, m := range cfg.Models {
		models[m.Name] = m
	}

	type job struct{ row, rep int }
	type outcome struct {
		row       int
		verdict   Verdict
		wrong     bool
		n         int
		relStddev float64
	}
	jobs := make(chan job)
	outcomes := make(chan outcome)
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				row := rows[j.row]
				rng := rand.New(rand.NewPCG(cfg.Seed, uint64(j.row)<<32|uint64(j.rep)))
				c, wrong := simulateOne(rng, models[row.Model], row.Noise, row.Effect, j.rep, th)
				outcomes <- outcome{j.row, c.Verdict, wrong, min(c.A.N, c.B.N), c.A.RelStddev}
			}
		}()
	}
	go func() {
		for i, r := range rows {
			for rep := range r.Runs {
				jobs <- job{i, rep}
			}
		}
		close(jobs)
		wg.Wait()
		close(outcomes)
	}()
	for o := range outcomes {
		r := &rows[o.row]
		switch o.verdict {
		case Regression, Improvement:
			r.Different++
		case Same:
			r.Same++
		case Inconclusive:
			r.Inconclusive++
		}
		if o.wrong {
			r.Wrong++
		}
		r.MeanSamples += float64(o.n)
		r.RelStddev += o.relStddev
	}
	for i := range rows {
		rows[i].MeanSamples /= float64(rows[i].Runs)
		rows[i].RelStddev /= float64(rows[i].Runs)
	}
	return rows
}

// simulateOne runs one sequential comparison and reports whether its
// verdict is a difference in the wrong direction.
func simulateOne(rng *rand.Rand, m NoiseModel, s, effect float64, rep int, th Thresholds) (Comparison, bool) {
	dir := Direction(rep % 2)
	factor := 1 + effect
	if (rep/2)%2 == 1 {
		factor = 1 / factor
	}
	var a, b []float64
	c := Comparison{Verdict: Unknown}
	for more := th.StartSamples; more > 0; more = th.More(c) {
		for range more {
			a = append(a, m.Draw(rng, s))
			b = append(b, factor*m.Draw(rng, s))
		}
		c = Compare(a, b, dir, th)
	}
	if !c.Verdict.Different() {
		return c, false
	}
	if effect == 0 {
		return c, true
	}
	bHigher := factor > 1
	regression := bHigher == (dir == LowerIsBetter)
	return c, regression != (c.Verdict == Regression)
}

// FormatSimTable renders rows as Markdown: a summary line per model and
// noise level, then every cell.
func FormatSimTable(rows []SimRow) string {
	var sb strings.Builder
	type key struct {
		model string
		noise float64
	}
	var order []key
	groups := make(map[key][]SimRow)
	var effects []float64
	seen := make(map[float64]bool)
	for _, r := range rows {
		k := key{r.Model, r.Noise}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
		if r.Effect > 0 && !seen[r.Effect] {
			seen[r.Effect] = true
			effects = append(effects, r.Effect)
		}
	}
	pct := func(n, of int) string {
		if of == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
	}

	sb.WriteString("| model | noise | measured noise | A/A different | A/A same |")
	for _, e := range effects {
		fmt.Fprintf(&sb, " power %g%% |", 100*e)
	}
	sb.WriteString(" inconclusive | mean n/side | wrong direction |\n|---|---|---|---|---|")
	for range effects {
		sb.WriteString("---|")
	}
	sb.WriteString("---|---|---|\n")
	for _, k := range order {
		g := groups[k]
		var null SimRow
		power := make(map[float64]SimRow)
		runs, inconclusive, wrong := 0, 0, 0
		samples := 0.0
		for _, r := range g {
			if r.Effect == 0 {
				null = r
			} else {
				power[r.Effect] = r
				wrong += r.Wrong
			}
			runs += r.Runs
			inconclusive += r.Inconclusive
			samples += r.MeanSamples * float64(r.Runs)
		}
		fmt.Fprintf(&sb, "| %s | %g%% | %.1f%% | %s | %s |", k.model, 100*k.noise, 100*null.RelStddev,
			pct(null.Different, null.Runs), pct(null.Same, null.Runs))
		for _, e := range effects {
			fmt.Fprintf(&sb, " %s |", pct(power[e].Different, power[e].Runs))
		}
		fmt.Fprintf(&sb, " %s | %.1f | %d |\n", pct(inconclusive, runs), samples/float64(runs), wrong)
	}

	nullRuns, nullDiff, wrong, wrongRuns := 0, 0, 0, 0
	for _, r := range rows {
		if r.Effect == 0 {
			nullRuns += r.Runs
			nullDiff += r.Different
		} else {
			wrong += r.Wrong
			wrongRuns += r.Runs
		}
	}
	if nullRuns > 0 {
		rate := float64(nullDiff) / float64(nullRuns)
		fmt.Fprintf(&sb, "\nAll A/A comparisons: %d of %d false \"different\" (%.2f%%, 95%% upper bound %.2f%%). Wrong direction: %d of %d comparisons with an effect.\n",
			nullDiff, nullRuns, 100*rate, 100*(rate+1.96*math.Sqrt(rate*(1-rate)/float64(nullRuns))), wrong, wrongRuns)
	}

	sb.WriteString("\n| model | noise | effect | runs | different | wrong direction | same | inconclusive | unknown | mean n/side |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		unknown := r.Runs - r.Different - r.Same - r.Inconclusive
		wrong := fmt.Sprint(r.Wrong)
		if r.Effect == 0 {
			wrong = "-" // every "different" is false; see the different column
		}
		fmt.Fprintf(&sb, "| %s | %g%% | %g%% | %d | %s | %s | %s | %s | %d | %.1f |\n",
			r.Model, 100*r.Noise, 100*r.Effect, r.Runs, pct(r.Different, r.Runs), wrong,
			pct(r.Same, r.Runs), pct(r.Inconclusive, r.Runs), unknown, r.MeanSamples)
	}
	return sb.String()
}
