package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/internal/config"
	"github.com/pgbisect/pgbisect/internal/proc"
)

func init() {
	register(command{
		Name:    "run",
		Summary: "measure one build with a scenario and print a table of its metrics",
		Run:     runRun,
	})
}

// runSetFlag collects repeated --set var=value flags.
type runSetFlag map[string]string

func (f runSetFlag) String() string { return "" }

func (f runSetFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("--set %q: want variable=value, e.g. --set scale=100", s)
	}
	f[k] = v
	return nil
}

func runRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "run", "-s SCENARIO [REV | --bindir DIR] [flags]")
	scenario := fs.String("s", "", "scenario file (required)")
	fs.StringVar(scenario, "scenario", "", "scenario file (same as -s)")
	binDir := fs.String("bindir", "", "measure the installation in `DIR` (e.g. /usr/lib/postgresql/15/bin) instead of building REV")
	samples := fs.Int("samples", 5, "samples per matrix point")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	point := fs.String("point", "", "run only the matrix point `P` (e.g. clients=1)")
	sets := runSetFlag{}
	fs.Var(sets, "set", "set a scenario variable: `var=value` (repeatable; a matrix variable takes a comma list)")
	flags := addCommonFlags(fs)
	clientBin := fs.String("client-bin", "", "directory of the pgbench to use (default bench.client_bin, else the build's)")
	keep := fs.Bool("keep-clusters", false, "keep cluster directories for debugging")
	pos, err := parseFlags(fs, env)
	if err != nil {
		return err
	}
	if *scenario == "" {
		return usageError("-s SCENARIO is required (e.g. -s configs/scenarios/copy-single.yaml)")
	}
	if *samples < 1 {
		return usageError("--samples must be 1 or more")
	}
	if (len(pos) == 0) == (*binDir == "") || len(pos) > 1 {
		return usageError("give one REV to build, or --bindir DIR to measure an existing installation")
	}
	cfg, err := flags.load()
	if err != nil {
		return err
	}
	sc, err := bench.LoadFileWith(*scenario, sets)
	if err != nil {
		return err
	}
	points := sc.Points()
	if *point != "" {
		pt, err := sc.FindPoint(*point)
		if err != nil {
			return usageError("%v", err)
		}
		points = []bench.Point{pt}
	}

	// Builds and benchmarks must not overlap with a nightly pass, a daemon
	// job or another run on this machine.
	unlock, err := nightlyLockMachine(ctx, env, cfg.StateDir, true)
	if err != nil {
		return err
	}
	defer unlock()

	var target bench.Target
	if *binDir != "" {
		abs, err := filepath.Abs(*binDir)
		if err != nil {
			return err
		}
		target = bench.Target{Name: filepath.Base(filepath.Dir(abs)), BinDir: abs, BuildOptions: "installed at " + abs}
		if filepath.Base(abs) != "bin" {
			target.Name = filepath.Base(abs)
		}
	} else {
		if target, err = runBuildTarget(ctx, env, cfg, pos[0]); err != nil {
			return err
		}
	}

	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	r := &bench.Runner{
		StateDir:     cfg.StateDir,
		ClientBin:    runFirstNonEmpty(*clientBin, cfg.Bench.ClientBin),
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

	res := runResult{Scenario: sc.Name, File: sc.File, Target: target.Name, BinDir: target.BinDir, Samples: *samples, Vars: sc.Vars()}
	start := time.Now()
	total := len(points) * *samples
	done := 0
	for _, pt := range points {
		pr := runPointResult{Point: pt.String()}
		for i := 1; i <= *samples; i++ {
			fmt.Fprintf(env.Stderr, "%s%s: sample %d/%d (%d/%d overall, %s elapsed%s)\n", sc.Name, runPointLabel(pt), i, *samples,
				done+1, total, time.Since(start).Round(time.Second), runETA(start, done, total))
			s, err := r.Run(ctx, sc, target, pt)
			if err != nil {
				return err
			}
			pr.Samples = append(pr.Samples, *s)
			done++
		}
		for _, m := range sc.MetricSpecs() {
			// A server statistic the server lacks has no value (the sample's
			// warnings say why): left out, not taken as 0.
			var xs []float64
			for _, s := range pr.Samples {
				if v, ok := s.Values[m.Name]; ok {
					xs = append(xs, v)
				}
			}
			pr.Metrics = append(pr.Metrics, runMetricResult{
				Name: m.Name, Unit: m.Unit, Better: runBetter(m.Direction), Summary: stats.Summarize(xs), Values: xs,
			})
		}
		res.Points = append(res.Points, pr)
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return runPrintTable(env.Stdout, res)
}

// runResult is the --json output of pgbisect run.
type runResult struct {
	Scenario string            `json:"scenario"`
	File     string            `json:"file"`
	Target   string            `json:"target"`
	BinDir   string            `json:"bindir"`
	Samples  int               `json:"samples_per_point"`
	Vars     map[string]string `json:"variables"`
	Points   []runPointResult  `json:"points"`
}

type runPointResult struct {
	Point   string            `json:"point"`
	Metrics []runMetricResult `json:"metrics"`
	Samples []bench.Sample    `json:"samples"`
}

type runMetricResult struct {
	Name    string        `json:"name"`
	Unit    string        `json:"unit"`
	Better  string        `json:"better"`
	Summary stats.Summary `json:"summary"`
	Values  []float64     `json:"values"`
}

func runBetter(d stats.Direction) string {
	if d == stats.HigherIsBetter {
		return "higher"
	}
	return "lower"
}

func runPrintTable(w io.Writer, res runResult) error {
	fmt.Fprintf(w, "scenario %s, target %s (%s), %d samples per point\n\n", res.Scenario, res.Target, res.BinDir, res.Samples)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	io.WriteString(tw, "point\tmetric\tn\tmedian\tmin\tmax\t%stddev\tunit\tbetter\t\n")
	for _, p := range res.Points {
		pt := p.Point
		if pt == "" {
			pt = "-"
		}
		for _, m := range p.Metrics {
			s := m.Summary
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t\n", pt, m.Name, s.N,
				runNum(s.Median), runNum(s.Min), runNum(s.Max), 100*s.RelStddev, m.Unit, m.Better)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(res.Points) > 0 && len(res.Points[0].Samples) > 0 {
		e := res.Points[0].Samples[0].Env
		fmt.Fprintf(w, "\nserver %s; %s\n", e.ServerVersion, e)
	}
	return nil
}

// runNum prints a figure with about four significant digits.
func runNum(x float64) string {
	switch ax := math.Abs(x); {
	case ax == 0:
		return "0"
	case ax >= 1000:
		return fmt.Sprintf("%.0f", x)
	case ax >= 100:
		return fmt.Sprintf("%.1f", x)
	case ax >= 10:
		return fmt.Sprintf("%.2f", x)
	case ax >= 1:
		return fmt.Sprintf("%.3f", x)
	default:
		return fmt.Sprintf("%.4g", x)
	}
}

func runPointLabel(pt bench.Point) string {
	if s := pt.String(); s != "" {
		return " [" + s + "]"
	}
	return ""
}

func runETA(start time.Time, done, total int) string {
	if done == 0 {
		return ""
	}
	left := time.Duration(float64(time.Since(start)) / float64(done) * float64(total-done))
	return fmt.Sprintf(", ~%s left", left.Round(time.Second))
}

func runFirstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// runBuildTarget builds rev, or takes its build from the cache, and
// returns it as the target to measure.
func runBuildTarget(ctx context.Context, env *Env, cfg *config.Config, rev string) (bench.Target, error) {
	b, repo, err := openBuilder(ctx, env, cfg)
	if err != nil {
		return bench.Target{}, err
	}
	c, err := repo.Resolve(rev)
	if err != nil && repo.Remote() != "" {
		// A cloned repository may simply be behind: fetch once and retry.
		fmt.Fprintf(env.Stderr, "%v; fetching %s from %s\n", err, cfg.Branch, repo.Remote())
		if ferr := repo.Fetch(ctx, cfg.Branch); ferr != nil {
			return bench.Target{}, ferr
		}
		c, err = repo.Resolve(rev)
	}
	if err != nil {
		return bench.Target{}, err
	}
	fmt.Fprintf(env.Stderr, "building %s %s (or reusing its cached build)\n", c.Short(), c.Subject)
	inst, err := b.Build(ctx, c.Hash)
	if err != nil {
		return bench.Target{}, fmt.Errorf("building %s: %w", c.Short(), err)
	}
	return bench.Target{Name: c.Short(), BinDir: inst.BinDir(), BuildOptions: inst.Options.String()}, nil
}
