package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/pgbisect/pgbisect/internal/app"
)

func init() {
	register(command{
		Name:    "run",
		Summary: "measure one build with a scenario and print a table of its metrics",
		Run:     runRun,
	})
}

// runSetFlag collects repeated --set var=value flags.
type runSetFlag = app.SetFlag

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
	cpus := fs.String("cpus", "", "pin the server and the clients: `server=LIST,client=LIST` (e.g. server=1,client=0), or off;\ndefault: the scenario's cpus: section")
	keep := fs.Bool("keep-clusters", false, "keep cluster directories for debugging")
	pos, err := parseFlags(fs, env)
	if err != nil {
		return err
	}
	if *scenario == "" {
		return usageError("-s SCENARIO is required (e.g. -s configs/scenarios/copy-single.yaml)")
	}
	if (len(pos) == 0) == (*binDir == "") || len(pos) > 1 {
		return usageError("give one REV to build, or --bindir DIR to measure an existing installation")
	}
	a, _, err := flags.open(ctx, env)
	if err != nil {
		return err
	}
	defer a.Close()
	req := app.RunRequest{Scenario: *scenario, Set: sets, BinDir: *binDir, Samples: *samples, Point: *point,
		ClientBin: *clientBin, KeepClusters: *keep, CPUs: *cpus}
	if len(pos) == 1 {
		req.Rev = pos[0]
	}
	res, err := a.Run(ctx, req, progress(env.Stderr))
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return runPrintTable(env.Stdout, *res)
}

// The printers' names for the application's results.
type (
	runResult       = app.RunResult
	runPointResult  = app.RunPointResult
	runMetricResult = app.RunMetricResult
)

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
	for _, p := range res.Points {
		for _, m := range p.Metrics {
			if m.Bimodal {
				at := ""
				if p.Point != "" {
					at = " at " + p.Point
				}
				fmt.Fprintf(w, "%s%s looks bimodal: its values form two separate groups\n", m.Name, at)
			}
		}
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
