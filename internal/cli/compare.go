package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/profile"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/internal/config"
	"github.com/pgbisect/pgbisect/internal/proc"
)

func init() {
	register(command{
		Name:    "compare",
		Summary: "measure two builds interleaved, with adaptive sampling, and give a verdict per metric",
		Run:     runCompare,
	})
}

// compareResult is the --json output of pgbisect compare.
type compareResult struct {
	Scenario string `json:"scenario"`
	A        string `json:"a"`
	B        string `json:"b"`
	// Patches are the files --patch applied on top of A to make B.
	Patches    []string         `json:"patches,omitempty"`
	ClientBin  string           `json:"client_bin"`
	Thresholds stats.Thresholds `json:"thresholds"`
	// OrderSeed seeds the order of samples (bench.Order; one order per
	// point, seeded bench.Mix64(OrderSeed+i)): --order-seed repeats it.
	OrderSeed uint64               `json:"order_seed"`
	Points    []comparePointResult `json:"points"`
	Elapsed   time.Duration        `json:"elapsed_ns"`
}

type comparePointResult struct {
	Point   string                `json:"point"`
	Metrics []compareMetricResult `json:"metrics"`
	Env     bench.Environment     `json:"environment"`
	// Profile is where B's CPU time went against A's, from --profile runs.
	Profile *profile.Summary `json:"profile,omitempty"`
}

type compareMetricResult struct {
	Name       string           `json:"name"`
	Unit       string           `json:"unit"`
	Better     string           `json:"better"`
	Comparison stats.Comparison `json:"comparison"`
	// Record marks a metric the scenario records but does not judge.
	Record bool      `json:"record,omitempty"`
	A      []float64 `json:"a_values"`
	B      []float64 `json:"b_values"`
}

func runCompare(ctx context.Context, env *Env) error {
	fs := newFlags(env, "compare", "-s SCENARIO A B [flags]\n       pgbisect compare -s SCENARIO BASE --patch FILE [--patch FILE ...] [flags]\n\n"+
		"A and B are revisions to build (or reuse from the cache), or bin directories of installations.\n"+
		"With --patch, B is BASE with the patches applied in order (git diff or format-patch output, or an mbox).")
	scenario := fs.String("s", "", "scenario file (required)")
	fs.StringVar(scenario, "scenario", "", "scenario file (same as -s)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	point := fs.String("point", "", "compare only the matrix point `P` (e.g. clients=1)")
	sets := runSetFlag{}
	fs.Var(sets, "set", "set a scenario variable: `var=value` (repeatable)")
	flags := addCommonFlags(fs)
	clientBin := fs.String("client-bin", "", "directory of the pgbench/psql used for both sides (default bench.client_bin, else A's)")
	alpha := fs.Float64("alpha", 0, "false \"different\" rate across all looks (default 0.01)")
	minEffect := fs.Float64("min-effect", 0, "smallest relative change that matters, e.g. 0.05 (default 0.03)")
	maxSamples := fs.Int("max-samples", 0, "budget of samples per side and point (default 30)")
	maxTime := fs.Duration("max-time", 0, "wall-clock budget per point (default none)")
	keep := fs.Bool("keep-clusters", false, "keep cluster directories for debugging")
	prof := fs.Bool("profile", false, "after the verdict, profile both sides with perf and print where the CPU time went (evidence only)")
	profRuns := fs.Int("profile-runs", 5, "profiled samples per side with --profile")
	flame := fs.String("flamegraph", "", "with --profile, write the differential flame graph (B against A) as SVG to `FILE`")
	var patches buildFlagList
	fs.Var(&patches, "patch", "apply `FILE` (git diff, git format-patch or an mbox) on top of the one revision given and compare with it (repeatable, applied in order)")
	orderSeed := fs.Uint64("order-seed", 0, "seed of the order of samples, which side starts each A B B A block (default random; the JSON output records it)")
	pos, err := parseFlags(fs, env)
	if err != nil {
		return err
	}
	if *scenario == "" {
		return usageError("-s SCENARIO is required (e.g. -s configs/scenarios/copy-single.yaml)")
	}
	if len(patches) > 0 && len(pos) != 1 {
		return usageError("with --patch give one revision, the base the patches apply to (e.g. compare -s copy.yaml master --patch fix.patch)")
	}
	if len(patches) == 0 && len(pos) != 2 {
		return usageError("give two revisions: the baseline A and the candidate B (e.g. compare -s copy.yaml master~10 master)")
	}
	if *prof && *profRuns < 1 {
		return usageError("--profile-runs must be 1 or more (5 by default; 4 a side is the fewest that can reach p < 0.05)")
	}
	if *flame != "" && !*prof {
		return usageError("--flamegraph needs --profile")
	}
	cfg, err := flags.load()
	if err != nil {
		return err
	}
	sc, err := bench.LoadFileWith(*scenario, sets)
	if err != nil {
		return err
	}
	// A comparison's verdict is final, so it uses stats' defaults (alpha
	// 0.01), not the bisection search's liberal ones.
	base := cfg.Stats.Apply(stats.DefaultThresholds)
	flagStats := &config.Stats{Alpha: *alpha, MinEffect: *minEffect, MaxSamples: *maxSamples, MaxTime: *maxTime}
	th := sc.Thresholds(base, nil, flagStats)
	points := sc.Points()
	if *point != "" {
		pt, err := sc.FindPoint(*point)
		if err != nil {
			return usageError("%v", err)
		}
		points = []bench.Point{pt}
	}
	unlock, err := nightlyLockMachine(ctx, env, cfg.StateDir, true)
	if err != nil {
		return err
	}
	defer unlock()

	patchedName := ""
	if len(patches) > 0 {
		if pos, patchedName, err = comparePatched(ctx, env, cfg, pos[0], patches); err != nil {
			return err
		}
	}
	var targets [2]bench.Target
	for i, rev := range pos {
		if targets[i], err = compareTarget(ctx, env, cfg, rev); err != nil {
			return err
		}
	}
	if patchedName != "" {
		targets[1].Name = patchedName
	}
	if targets[0].Name == targets[1].Name {
		// The same commit on both sides (an A/A check): tell the sides apart.
		targets[0].Name += "(A)"
		targets[1].Name += "(B)"
	}
	if targets[0].BinDir == targets[1].BinDir {
		fmt.Fprintf(env.Stderr, "note: %s and %s share one build; comparing it with itself\n", pos[0], pos[1])
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	r := &bench.Runner{
		StateDir: cfg.StateDir,
		// One pgbench for both sides, so a change in the client is not
		// mistaken for a change in the server.
		ClientBin:    runFirstNonEmpty(*clientBin, cfg.Bench.ClientBin, targets[0].BinDir),
		Progress:     env.Stderr,
		Log:          env.Log,
		KeepClusters: *keep || cfg.Bench.KeepClusters,
	}
	if proc.IsRoot() {
		if r.RunAs, err = proc.LookupUser(cfg.RunAs); err != nil {
			return err
		}
	}
	defer r.Close(context.WithoutCancel(ctx))

	start := time.Now()
	seed := *orderSeed
	for seed == 0 {
		seed = rand.Uint64()
	}
	res := compareResult{Scenario: sc.Name, A: targets[0].Name, B: targets[1].Name, ClientBin: r.ClientBin, Thresholds: th, OrderSeed: seed, Patches: patches}
	for i, pt := range points {
		order := bench.Order{Seed: bench.Mix64(seed + uint64(i)), Targets: 2}
		pr, err := comparePoint(ctx, env, r, sc, targets, pt, order, base, flagStats)
		if err != nil {
			return err
		}
		if *prof {
			if pr.Profile, err = compareProfiled(ctx, env, r, sc, targets, pt, order, *profRuns, flameGraphPath(*flame, pt, len(points))); err != nil {
				return err
			}
		}
		res.Points = append(res.Points, pr)
	}
	res.Elapsed = time.Since(start)
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return comparePrint(env.Stdout, res)
}

// compareTarget builds rev, or, when rev is a directory holding pg_ctl (an
// installation's bin directory), measures that installation as it is.
func compareTarget(ctx context.Context, env *Env, cfg *config.Config, rev string) (bench.Target, error) {
	if st, err := os.Stat(filepath.Join(rev, "pg_ctl")); err == nil && !st.IsDir() {
		abs, err := filepath.Abs(rev)
		if err != nil {
			return bench.Target{}, err
		}
		return bench.Target{Name: abs, BinDir: abs, BuildOptions: "installed at " + abs}, nil
	}
	return runBuildTarget(ctx, env, cfg, rev)
}

// comparePoint samples both targets at pt, interleaved in order, in the
// batches the thresholds plan, until every metric has a verdict or the
// budget is spent. Thresholds are layered by sc.Thresholds over base (the
// defaults with the config's stats) with the flags on top: the scenario's
// for the sampling plan, each metric's for its verdict.
func comparePoint(ctx context.Context, env *Env, r *bench.Runner, sc *bench.Scenario, targets [2]bench.Target, pt bench.Point, order bench.Order, base stats.Thresholds, flags *config.Stats) (comparePointResult, error) {
	th := sc.Thresholds(base, nil, flags)
	specs := sc.MetricSpecs()
	values := make([][2][]float64, len(specs))
	pr := comparePointResult{Point: pt.String()}
	var count [2]int // samples per side
	start := time.Now()
	n, want := 0, th.StartSamples
	for {
		err := bench.Interleave(ctx, r, sc, targets[:], pt, order.Rounds(n, want-n), func(s bench.Sample) error {
			side := 0
			if s.Target == targets[1].Name {
				side = 1
			}
			for i, m := range specs {
				// A server statistic the server lacks has no value (and a
				// warning in s.Env); it is left out, not taken as 0.
				if v, ok := s.Values[m.Name]; ok {
					values[i][side] = append(values[i][side], v)
				}
			}
			pr.Env = s.Env
			count[side]++
			fmt.Fprintf(env.Stderr, "compare%s: %s sample %d/%d of up to %d per side, %s elapsed\n",
				runPointLabel(pt), s.Target, count[side], want, th.MaxSamples, time.Since(start).Round(time.Second))
			return nil
		})
		if err != nil {
			return pr, err
		}
		n = want
		more := 0
		pr.Metrics = pr.Metrics[:0]
		overTime := th.MaxTime > 0 && time.Since(start) >= th.MaxTime
		for i, m := range specs {
			mth := sc.Thresholds(base, &m, flags)
			c := stats.Compare(values[i][0], values[i][1], m.Direction, mth)
			if overTime {
				c = c.AtBudget()
			}
			// Recorded-only metrics, and statistics no sample had, wait
			// for nothing.
			if !m.Record && len(values[i][0])+len(values[i][1]) > 0 {
				more = max(more, th.More(c))
			}
			pr.Metrics = append(pr.Metrics, compareMetricResult{
				Name: m.Name, Unit: m.Unit, Better: runBetter(m.Direction), Comparison: c,
				Record: m.Record, A: values[i][0], B: values[i][1],
			})
		}
		if more == 0 {
			return pr, nil
		}
		fmt.Fprintf(env.Stderr, "compare%s: not yet decided at n=%d per side; taking %d more each\n", runPointLabel(pt), n, more)
		want = n + more
	}
}

// comparePrint writes a benchstat-like table: both sides, the change with its
// interval, p, n and the verdict; "~" marks no significant change.
func comparePrint(w io.Writer, res compareResult) error {
	fmt.Fprintf(w, "scenario %s: A = %s, B = %s (client tools %s, --order-seed %d)\n\n", res.Scenario, res.A, res.B, res.ClientBin, res.OrderSeed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "point\tmetric\tA median ±%%sd\tB median ±%%sd\tchange [%.0f%% CI]\tp\tn\tverdict\n", 100*res.Thresholds.Confidence)
	var warnings []string
	for _, p := range res.Points {
		pt := p.Point
		if pt == "" {
			pt = "-"
		}
		for _, m := range p.Metrics {
			c := m.Comparison
			change := compareChange(c)
			if !c.Verdict.Different() {
				change = "~ " + change
			}
			fmt.Fprintf(tw, "%s\t%s\t%s %s ±%.1f%%\t%s %s ±%.1f%%\t%s\t%s\t%d+%d\t%s\n", pt, m.Name,
				runNum(c.A.Median), m.Unit, 100*c.A.RelStddev, runNum(c.B.Median), m.Unit, 100*c.B.RelStddev,
				change, compareP(c.P), c.A.N, c.B.N, compareVerdict(m))
			for _, wn := range c.Warnings {
				warnings = append(warnings, fmt.Sprintf("%s %s: %s", pt, m.Name, wn))
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nregression/improvement: p below the look's level and the interval on one side of 1;\n"+
		"same: the interval inside ±%.0f%%; inconclusive: neither within %d samples per side.\n",
		100*res.Thresholds.MinEffect, res.Thresholds.MaxSamples)
	for _, wn := range warnings {
		fmt.Fprintf(w, "warning: %s\n", wn)
	}
	for _, p := range res.Points {
		if p.Profile != nil {
			compareProfilePrint(w, p.Point, p.Profile)
		}
	}
	if len(res.Points) > 0 {
		fmt.Fprintf(w, "\n%s\n", res.Points[0].Env)
	}
	return nil
}

func compareChange(c stats.Comparison) string {
	if math.IsNaN(c.Ratio) || c.Ratio == 0 {
		return "?"
	}
	return fmt.Sprintf("%+.1f%% [%+.1f%%, %+.1f%%]", 100*(c.Ratio-1), 100*(c.Lo-1), 100*(c.Hi-1))
}

func compareP(p float64) string {
	if math.IsNaN(p) {
		return "?"
	}
	if p < 0.001 {
		return "<0.001"
	}
	return fmt.Sprintf("%.3f", p)
}

// compareVerdict is the verdict column: a recorded-only metric is not
// judged.
func compareVerdict(m compareMetricResult) string {
	if m.Record {
		return "(recorded)"
	}
	return m.Comparison.Verdict.String()
}
