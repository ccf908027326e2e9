package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"text/tabwriter"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/internal/app"
)

func init() {
	register(command{
		Name:    "compare",
		Summary: "measure two builds interleaved, with adaptive sampling, and give a verdict per metric",
		Run:     runCompare,
	})
}

// The printers' names for the application's results.
type (
	compareResult       = app.CompareResult
	comparePointResult  = app.ComparePointResult
	compareMetricResult = app.CompareMetricResult
)

func runCompare(ctx context.Context, env *Env) error {
	err := compareRun(ctx, env)
	if err == nil || !wantsExitCode(env.Args) {
		return err
	}
	// With --exit-code every failure is a status git bisect run acts on
	// (see compareErrorCode); the results printed already say the verdict.
	var status *exitStatus
	if errors.As(err, &status) || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &exitStatus{code: compareErrorCode(ctx, err), err: err}
}

func compareRun(ctx context.Context, env *Env) error {
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
	exitCode := fs.Bool("exit-code", false, "exit 0 when B is the same as A or faster, 1 when a metric regressed, 125 when undecided or a side\n"+
		"cannot be built or measured, 128 on any other error: git bisect run's statuses (docs/cli.md)")
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
	b := ""
	if len(pos) == 2 {
		b = pos[1]
	}
	for i, p := range patches {
		if abs, err := filepath.Abs(p); err == nil {
			patches[i] = abs
		}
	}
	a, _, err := flags.open(ctx, env)
	if err != nil {
		return err
	}
	defer a.Close()
	res, err := a.Compare(ctx, app.CompareRequest{
		Scenario: *scenario, Set: sets, A: pos[0], B: b, Patches: patches, Point: *point, ClientBin: *clientBin,
		Alpha: *alpha, MinEffect: *minEffect, MaxSamples: *maxSamples, MaxTime: *maxTime, KeepClusters: *keep,
		OrderSeed: *orderSeed, Profile: *prof, ProfileRuns: *profRuns, FlameGraph: *flame,
	}, progress(env.Stderr))
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	} else {
		err = comparePrint(env.Stdout, *res)
	}
	if err != nil || !*exitCode {
		return err
	}
	if code, why := compareExitCode(res); code != 0 {
		return &exitStatus{code: code, err: errors.New(why)}
	}
	return nil
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
