package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
)

// A NoiseModel draws the measurements of a benchmark whose true median is
// near 1, with relative noise about s (a fraction). Exactly one of Draw and
// Stream is set. NoiseModels is the one family of them: the simulations of
// comparisons here and of whole bisections (package bisect) both draw from
// it, through Source.
type NoiseModel struct {
	Name string
	// About says how the model is built, for the table's legend.
	About string
	// Draw draws one independent measurement.
	Draw func(r *rand.Rand, s float64) float64
	// Stream returns the source of one comparison's measurements, for
	// noise that depends on time (drift, autocorrelation) or replays
	// recordings. The source is called in the order the sampler takes the
	// runs (A B B A A B ...) with the side: 0 for A, 1 for B.
	Stream func(r *rand.Rand, s float64) func(side int) float64
}

// Source returns the measurement source of one comparison (or one simulated
// bisection) under m: each call is the next run, side 0 for A and 1 for B.
func (m NoiseModel) Source(r *rand.Rand, s float64) func(side int) float64 {
	if m.Stream != nil {
		return m.Stream(r, s)
	}
	return func(int) float64 { return m.Draw(r, s) }
}

// NoiseModels are the models Simulate uses by default, chosen from what
// PostgreSQL benchmarks show: symmetric run-to-run noise, a right-skewed
// time distribution, occasional much slower runs (a checkpoint or cache
// eviction landing in one run), two distinct states a fresh server can
// settle in (huge pages, NUMA placement), heavy tails, and noise that is
// correlated in time (a machine whose speed wanders while it measures).
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
	{
		Name:  "heavy-tailed",
		About: "exp(b·T₃), T₃ Student's t with 3 degrees of freedom (infinite kurtosis), b = s/√3 so the log has stddev s",
		Draw: func(r *rand.Rand, s float64) float64 {
			return math.Exp(s / math.Sqrt(3) * studentT3(r))
		},
	},
	{
		Name:  "AR(1)",
		About: "exp(x_t), x_t = 0.8·x_{t-1} + 0.6·s·Z_t in the order the runs are taken: each run's log noise correlated 0.8 with the previous run's, stddev s",
		Stream: func(r *rand.Rand, s float64) func(int) float64 {
			x := s * r.NormFloat64()
			return func(int) float64 {
				x = 0.8*x + 0.6*s*r.NormFloat64()
				return math.Exp(x)
			}
		},
	},
	{
		Name:  "drift",
		About: "exp(w_t + e_t): a mean-reverting walk w (stddev s/√2, correlation time 50 runs) that moves the machine's speed, plus independent noise e (stddev s/√2)",
		Stream: func(r *rand.Rand, s float64) func(int) float64 {
			const theta = 1.0 / 50
			b := s / math.Sqrt2
			w := b * r.NormFloat64()
			return func(int) float64 {
				w = (1-theta)*w + b*math.Sqrt(2*theta)*r.NormFloat64()
				return math.Exp(w + b*r.NormFloat64())
			}
		},
	},
}

// TiedNoiseModels are measurements with ties, as counts are: instructions
// executed, rows, pages. Simulate uses them when SimConfig.Models names
// them; the study of samples by effect size (sim_test.go) does.
var TiedNoiseModels = []NoiseModel{
	{
		Name:  "tied",
		About: "1 + s·round(Z): every run on a grid of step s, most runs tied with others",
		Draw:  func(r *rand.Rand, s float64) float64 { return 1 + s*math.Round(r.NormFloat64()) },
	},
	{
		Name:  "constant",
		About: "1: every run gives exactly the same value (s is ignored), a deterministic count",
		Draw:  func(*rand.Rand, float64) float64 { return 1 },
	},
}

// NoiseModelNamed returns the model of NoiseModels or TiedNoiseModels
// called name.
func NoiseModelNamed(name string) (NoiseModel, error) {
	var names []string
	for _, m := range append(slices.Clone(NoiseModels), TiedNoiseModels...) {
		if m.Name == name {
			return m, nil
		}
		names = append(names, m.Name)
	}
	return NoiseModel{}, fmt.Errorf("no noise model %q (the models are %s)", name, strings.Join(names, ", "))
}

// studentT3 draws from Student's t distribution with 3 degrees of freedom.
func studentT3(r *rand.Rand) float64 {
	chi2 := 0.0
	for range 3 {
		z := r.NormFloat64()
		chi2 += z * z
	}
	return r.NormFloat64() / math.Sqrt(chi2/3)
}

// SimConfig configures Simulate. Zero fields take the defaults in brackets.
type SimConfig struct {
	Models  []NoiseModel // [NoiseModels]
	Noises  []float64    // relative noise levels [0.02, 0.05, 0.15]
	Effects []float64    // true relative changes of the median, > 0 [0.03, 0.05, 0.10, 0.20]
	// SameEffects are multiples of MinEffect whose effects are added to
	// Effects, to measure how often a real effect is called "same"
	// [1, 1.5, 2].
	SameEffects []float64
	NullReps    int        // A/A comparisons per model and noise [2000]
	Reps        int        // comparisons per model, noise and effect [500]
	Thresholds  Thresholds // [DefaultThresholds]
	Seed        uint64     // [1]
	Workers     int        // goroutines [1]
	// Only, when set, keeps the cells it holds for (the others are
	// neither run nor returned), and Take, when above 0, runs only the
	// first Take comparisons of each cell: every comparison kept has the
	// seed it has in the whole run, so the outcome is a subsample of the
	// whole run's, drawn without replacement (what CI checks the
	// README's figures with, see TestREADMEStatistics).
	Only func(SimRow) bool
	Take int
}

// SimRow is the outcome of the comparisons of one cell: one noise model at
// one noise level and one true effect (0 for A/A).
type SimRow struct {
	Model  string
	Noise  float64
	Effect float64
	// MinEffect is the band of "same" the comparisons used.
	MinEffect float64
	// Probe marks a cell added by SimConfig.SameEffects: its effect is
	// there to count false "same" verdicts, not to show power.
	Probe bool
	Runs  int
	// Different counts Regression or Improvement verdicts; Wrong counts
	// those whose direction contradicts the truth (every Different is wrong
	// when Effect is 0).
	Different, Wrong, Same, Inconclusive int
	// FalseSame counts Same verdicts for a true ratio at or beyond the
	// edges of the band [1-MinEffect, 1+MinEffect]. A change "smaller by
	// the effect" is a ratio of 1/(1+effect), which for an effect of
	// exactly MinEffect lies inside the band: "same" is right for it.
	FalseSame int
	// Covered counts comparisons whose final interval [Lo, Hi] holds the
	// true ratio of B to A.
	Covered int
	// MeanSamples is the mean number of runs per side when the comparison
	// stopped.
	MeanSamples float64
	// MaxSamples is the largest number of runs per side any comparison of
	// the cell took; Early counts the comparisons that stopped with at most
	// StartSamples runs per side (5 by default).
	MaxSamples, Early int
	// RelStddev is the mean relative stddev of the baseline samples as
	// measured, to show how noisy the model really is.
	RelStddev float64
}

// Simulate runs seeded sequential comparisons exactly as a sampler would:
// FirstLook per side, then up to StartSamples, then Batch more per side while Thresholds.More
// asks, up to MaxSamples, taking the runs in the sampler's order A B B A.
// Half the comparisons use LowerIsBetter and half HigherIsBetter, and half
// make B larger by 1+effect while half make it smaller by the same factor,
// so both directions are tested. The result depends only on cfg, not on
// Workers.
func Simulate(cfg SimConfig) []SimRow {
	if cfg.Models == nil {
		cfg.Models = NoiseModels
	}
	if cfg.Noises == nil {
		cfg.Noises = []float64{0.02, 0.05, 0.15}
	}
	if cfg.Effects == nil {
		cfg.Effects = []float64{0.03, 0.05, 0.10, 0.20}
	}
	if cfg.SameEffects == nil {
		cfg.SameEffects = []float64{1, 1.5, 2}
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
	effects := slices.Clone(cfg.Effects)
	probe := map[float64]bool{}
	for _, k := range cfg.SameEffects {
		if e := k * th.MinEffect; !slices.Contains(effects, e) {
			effects = append(effects, e)
			probe[e] = true
		}
	}
	slices.Sort(effects)

	var rows []SimRow
	for _, m := range cfg.Models {
		for _, s := range cfg.Noises {
			rows = append(rows, SimRow{Model: m.Name, Noise: s, MinEffect: th.MinEffect, Runs: cfg.NullReps})
			for _, e := range effects {
				rows = append(rows, SimRow{Model: m.Name, Noise: s, Effect: e, MinEffect: th.MinEffect, Probe: probe[e], Runs: cfg.Reps})
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
		covered   bool
		falseSame bool
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
				c, wrong, covered, falseSame := simulateOne(rng, models[row.Model], row.Noise, row.Effect, j.rep, th)
				outcomes <- outcome{j.row, c.Verdict, wrong, covered, falseSame, min(c.A.N, c.B.N), c.A.RelStddev}
			}
		}()
	}
	for i := range rows {
		if cfg.Only != nil && !cfg.Only(rows[i]) {
			rows[i].Runs = 0
		} else if cfg.Take > 0 {
			rows[i].Runs = min(rows[i].Runs, cfg.Take)
		}
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
		if o.covered {
			r.Covered++
		}
		if o.falseSame {
			r.FalseSame++
		}
		r.MeanSamples += float64(o.n)
		r.MaxSamples = max(r.MaxSamples, o.n)
		if o.n <= th.StartSamples {
			r.Early++
		}
		r.RelStddev += o.relStddev
	}
	kept := rows[:0]
	for _, r := range rows {
		if r.Runs == 0 {
			continue
		}
		r.MeanSamples /= float64(r.Runs)
		r.RelStddev /= float64(r.Runs)
		kept = append(kept, r)
	}
	return kept
}

// simulateOne runs one sequential comparison and reports whether its
// verdict is a difference in the wrong direction, whether its final
// interval holds the true ratio and whether it is a false "same" (the true
// ratio at or beyond the band's edges).
func simulateOne(rng *rand.Rand, m NoiseModel, s, effect float64, rep int, th Thresholds) (c Comparison, wrong, covered, falseSame bool) {
	dir := LowerIsBetter
	if rep%2 == 1 {
		dir = HigherIsBetter
	}
	factor := 1 + effect
	if (rep/2)%2 == 1 {
		factor = 1 / factor
	}
	draw := m.Source(rng, s)
	var a, b []float64
	c = Comparison{Verdict: Unknown}
	for more := th.FirstLook(); more > 0; more = th.More(c) {
		for range more {
			// A B, then B A: the order of the sampler, which makes a
			// steady drift hit both sides alike.
			if len(a)%2 == 0 {
				a = append(a, draw(0))
				b = append(b, factor*draw(1))
			} else {
				b = append(b, factor*draw(1))
				a = append(a, draw(0))
			}
		}
		c = Compare(a, b, dir, th)
	}
	covered = c.Lo <= factor && factor <= c.Hi
	falseSame = c.Verdict == Same && (factor >= 1+th.MinEffect || factor <= 1-th.MinEffect)
	if !c.Verdict.Different() {
		return c, false, covered, falseSame
	}
	if effect == 0 {
		return c, true, covered, false
	}
	bHigher := factor > 1
	regression := bHigher == (dir == LowerIsBetter)
	return c, regression != (c.Verdict == Regression), covered, false
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
		if r.Effect > 0 && !r.Probe && !seen[r.Effect] {
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
	sb.WriteString(" same at 1× | same at 1.5× | same at 2× | coverage | inconclusive | mean n/side | wrong direction |\n|---|---|---|---|---|")
	for range effects {
		sb.WriteString("---|")
	}
	sb.WriteString("---|---|---|---|---|---|---|\n")
	for _, k := range order {
		g := groups[k]
		var null SimRow
		power := make(map[float64]SimRow)
		same := make(map[float64]SimRow) // by multiple of MinEffect
		runs, inconclusive, wrong, covered := 0, 0, 0, 0
		samples := 0.0
		for _, r := range g {
			if r.Effect == 0 {
				null = r
			} else {
				power[r.Effect] = r
				wrong += r.Wrong
			}
			for _, m := range []float64{1, 1.5, 2} {
				if r.Effect == m*r.MinEffect {
					same[m] = r
				}
			}
			runs += r.Runs
			inconclusive += r.Inconclusive
			covered += r.Covered
			samples += r.MeanSamples * float64(r.Runs)
		}
		fmt.Fprintf(&sb, "| %s | %s | %.1f%% | %s | %s |", k.model, noiseName(k.noise), 100*null.RelStddev,
			pct(null.Different, null.Runs), pct(null.Same, null.Runs))
		for _, e := range effects {
			fmt.Fprintf(&sb, " %s |", pct(power[e].Different, power[e].Runs))
		}
		fmt.Fprintf(&sb, " %s | %s | %s | %s | %s | %.1f | %d |\n", pct(same[1].FalseSame, same[1].Runs), pct(same[1.5].FalseSame, same[1.5].Runs), pct(same[2].FalseSame, same[2].Runs),
			pct(covered, runs), pct(inconclusive, runs), samples/float64(runs), wrong)
	}

	nullRuns, nullDiff, wrong, wrongRuns := 0, 0, 0, 0
	var falseSame [3]struct{ n, of int }
	covered, all := 0, 0
	for _, r := range rows {
		if r.Effect == 0 {
			nullRuns += r.Runs
			nullDiff += r.Different
		} else {
			wrong += r.Wrong
			wrongRuns += r.Runs
		}
		for i, m := range []float64{1, 1.5, 2} {
			if r.Effect == m*r.MinEffect {
				falseSame[i].n += r.FalseSame
				falseSame[i].of += r.Runs
			}
		}
		covered += r.Covered
		all += r.Runs
	}
	if nullRuns > 0 {
		rate := float64(nullDiff) / float64(nullRuns)
		fmt.Fprintf(&sb, "\nAll A/A comparisons: %d of %d false \"different\" (%.2f%%, 95%% upper bound %.2f%%). Wrong direction: %d of %d comparisons with an effect.\n",
			nullDiff, nullRuns, 100*rate, 100*(rate+1.96*math.Sqrt(rate*(1-rate)/float64(nullRuns))), wrong, wrongRuns)
	}
	if falseSame[1].of > 0 {
		fmt.Fprintf(&sb, "\"Same\" for a real change: %d of %d at 1× min effect (%s), %d of %d at 1.5× (%s), %d of %d at 2× (%s). Interval coverage: %d of %d (%s).\n",
			falseSame[0].n, falseSame[0].of, pct(falseSame[0].n, falseSame[0].of),
			falseSame[1].n, falseSame[1].of, pct(falseSame[1].n, falseSame[1].of),
			falseSame[2].n, falseSame[2].of, pct(falseSame[2].n, falseSame[2].of), covered, all, pct(covered, all))
	}

	sb.WriteString("\n| model | noise | effect | runs | different | wrong direction | same | inconclusive | unknown | coverage | mean n/side |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		unknown := r.Runs - r.Different - r.Same - r.Inconclusive
		wrong := fmt.Sprint(r.Wrong)
		if r.Effect == 0 {
			wrong = "-" // every "different" is false; see the different column
		}
		fmt.Fprintf(&sb, "| %s | %s | %.3g%% | %d | %s | %s | %s | %s | %d | %s | %.1f |\n",
			r.Model, noiseName(r.Noise), 100*r.Effect, r.Runs, pct(r.Different, r.Runs), wrong,
			pct(r.Same, r.Runs), pct(r.Inconclusive, r.Runs), unknown, pct(r.Covered, r.Runs), r.MeanSamples)
	}
	return sb.String()
}

// noiseName is the table's noise column: the model's nominal level, or
// "recorded" for models that replay recordings (level 0).
func noiseName(s float64) string {
	if s == 0 {
		return "recorded"
	}
	return fmt.Sprintf("%.3g%%", 100*s)
}

// FormatSamplesTable renders rows as a Markdown table of the samples per
// side by effect size: one line per model and noise level, one column per
// effect, each cell the mean number of runs per side at the verdict, the
// share of comparisons that stopped within StartSamples runs per side and
// the share that ended "different" (for effect 0, "same").
func FormatSamplesTable(rows []SimRow) string {
	type key struct {
		model string
		noise float64
	}
	var order []key
	cells := make(map[key]map[float64]SimRow)
	var effects []float64
	for _, r := range rows {
		if r.Probe {
			continue
		}
		k := key{r.Model, r.Noise}
		if cells[k] == nil {
			order = append(order, k)
			cells[k] = make(map[float64]SimRow)
		}
		cells[k][r.Effect] = r
		if !slices.Contains(effects, r.Effect) {
			effects = append(effects, r.Effect)
		}
	}
	slices.Sort(effects)
	var sb strings.Builder
	sb.WriteString("| model | noise |")
	for _, e := range effects {
		if e == 0 {
			sb.WriteString(" A/A |")
		} else {
			fmt.Fprintf(&sb, " %g%% |", 100*e)
		}
	}
	sb.WriteString("\n|---|---|")
	for range effects {
		sb.WriteString("---|")
	}
	sb.WriteString("\n")
	for _, k := range order {
		fmt.Fprintf(&sb, "| %s | %s |", k.model, noiseName(k.noise))
		for _, e := range effects {
			r, ok := cells[k][e]
			if !ok {
				sb.WriteString(" - |")
				continue
			}
			share := r.Different
			if e == 0 {
				share = r.Same
			}
			fmt.Fprintf(&sb, " %.1f / %.0f%% / %.0f%% |", r.MeanSamples, 100*float64(r.Early)/float64(r.Runs), 100*float64(share)/float64(r.Runs))
		}
		sb.WriteString("\n")
	}
	return sb.String()
}
