package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/notify"
)

func init() {
	register(command{
		Name:    "bisect",
		Summary: "find the commit(s) between a good and a bad revision that made a scenario slower",
		Run:     bisectRun,
	})
}

// bisectFlags declares the flags of a bisection on fs ('pgbisect bisect'
// and 'pgbisect request bisect' share them) and returns the function that
// gives the request once fs is parsed.
func bisectFlags(fs *flag.FlagSet) func() app.BisectRequest {
	var req app.BisectRequest
	fs.StringVar(&req.Scenario, "s", "", "scenario file (required unless --resume)")
	fs.StringVar(&req.Scenario, "scenario", "", "scenario file (same as -s)")
	fs.StringVar(&req.Good, "good", "", "a revision without the regression")
	fs.StringVar(&req.Bad, "bad", "", "a later revision with it (good must be its ancestor)")
	fs.StringVar(&req.Metric, "metric", "", "metric to bisect on (default: the scenario's first)")
	fs.StringVar(&req.Point, "point", "", "matrix point(s) to bisect at: `clients=1`, a list 'clients=1;clients=4' (or clients=1,clients=4), or all;\none bisection judges every point listed, sharing builds (needed when the scenario has several points)")
	fs.BoolVar(&req.FirstParent, "first-parent", false, "follow only first parents (merges count as one commit)")
	fs.BoolVar(&req.ReuseSamples, "reuse-samples", false, "let each comparison reuse every earlier sample of a commit: about half the samples, but only\nsafe on a dedicated, quiet machine (the speed of a shared one drifts over hours)")
	fs.BoolVar(&req.Exhaustive, "exhaustive", false, "judge every range beside the culprits instead of stopping once they explain the endpoints' change\n(slower; a regression that an improvement elsewhere in the range cancels is then still looked for)")
	fs.Float64Var(&req.MinEffect, "min-effect", 0, "smallest change worth a culprit, as a fraction (default 0.05)")
	fs.IntVar(&req.MaxSamples, "max-samples", 0, "sample budget per side of one comparison (default 60; checks get twice as many)")
	fs.DurationVar(&req.MaxTime, "max-time", 0, "bound on the whole bisection's time, such as 8h (default none): at it the bisection stops with the\nrange narrowed so far and the verdicts made; give a longer one when resuming to continue")
	fs.Float64Var(&req.Alpha, "alpha", 0, "false-positive rate of one search comparison (default 0.05; blames are bounded at 1% separately)")
	fs.StringVar(&req.Resume, "resume", "", "resume the bisection `ID` (re-running the same command resumes it too)")
	fs.BoolVar(&req.Post, "post", false, "post the finding to the GitHub repository of the config")
	sets := runSetFlag{}
	fs.Var(sets, "set", "set a scenario variable: `var=value` (repeatable)")
	fs.StringVar(&req.ClientBin, "client-bin", "", "directory of the pgbench and psql used for every run (default: bench.client_bin, else the good commit's build)")
	fs.BoolVar(&req.KeepClusters, "keep-clusters", false, "keep cluster directories for debugging")
	fs.BoolVar(&req.NoRevertCheck, "no-revert-check", false, "do not check the culprits by reverting them on top of the bad commit")
	profileRuns := fs.Int("profile-runs", app.DefaultProfileRuns, "CPU-profile each confirmed culprit and its parent with perf this many runs each (0: no profiles)")
	fs.BoolVar(&req.ProfileFramePointers, "profile-frame-pointers", false, "profile builds made with -fno-omit-frame-pointer (a separate build; the first is a full one) for exact inclusive shares")
	guided := fs.Bool("profile-guided", app.DefaultProfileGuided, "once the endpoints differ, CPU-profile them (3 runs each) and try first the commits that touch\nthe files of the functions whose share grew (docs/bisect.md, \"Profile-guided search\")")
	return func() app.BisectRequest {
		r := req
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "profile-runs":
				r.ProfileRuns = profileRuns
			case "profile-guided":
				r.ProfileGuided = guided
			}
		})
		if len(sets) > 0 {
			r.Set = map[string]string(sets)
		}
		return r
	}
}

func bisectRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "bisect", "-s SCENARIO --good REV --bad REV [flags]\n       pgbisect bisect --resume ID")
	request := bisectFlags(fs)
	asJSON := fs.Bool("json", false, "print the finding as JSON on stdout")
	verbose := fs.Bool("verbose", false, "on a terminal, print every build and sample line instead of one status line updated in place\n(they go to STATE/logs/bisect-ID.log otherwise)")
	flags := addStoreFlags(fs)
	if err := parseNoArgs(fs, env, "give revisions with --good and --bad"); err != nil {
		return err
	}
	req := request()
	if err := req.Validate(); err != nil {
		return err
	}
	cfg, err := flags.load()
	if err != nil {
		return err
	}
	p := newBisectProgress(terminalOf(env.Stderr), *verbose, filepath.Join(cfg.StateDir, "logs"))
	if l := p.logger(); l != nil {
		env.Log = l
	}
	a, err := app.Open(ctx, appOptions(cfg, env.Log), nil)
	if err != nil {
		return err
	}
	defer a.Close()
	out, err := a.Bisect(ctx, "", req, p.sink())
	p.close()
	if err != nil {
		return err
	}
	return bisectPrint(env.Stdout, out, *asJSON)
}

// bisectPrint prints a finished bisection: its finding as JSON, or the
// result for a person.
func bisectPrint(w io.Writer, out *app.BisectResult, asJSON bool) error {
	if asJSON {
		data, err := finding.Marshal(out.Finding)
		if err != nil {
			return err
		}
		_, err = w.Write(append(data, '\n'))
		return err
	}
	bisectPrintResult(w, out)
	return nil
}

// bisectPrintResult prints the outcome, the culprits and the report files.
func bisectPrintResult(w io.Writer, out *app.BisectResult) {
	st := out.State
	if st.Curve != nil {
		bisectPrintCurve(w, out)
	} else {
		bisectPrintCulprits(w, st)
	}
	revertPrint(w, out.Finding)
	if out.Finding.Stopped != nil {
		bisectPrintStopped(w, st.ID, out.Finding.Stopped)
	} else {
		for _, sub := range st.Searches() {
			at := ""
			if st.Curve != nil {
				at = " at " + sub.Inputs.Point
			}
			for _, u := range sub.Unresolved {
				fmt.Fprintf(w, "\nunresolved%s: %s..%s: %s\n", at, st.Commits[u.First].Short(), st.Commits[u.Last].Short(), u.Note)
			}
		}
	}
	fmt.Fprintf(w, "\n%d builds, %d samples in %s (%s building, %s measuring)\n", st.BuildsDone, st.SamplesTaken,
		bisectWall(st).Round(time.Second), st.BuildTime.Round(time.Second), st.MeasureTime.Round(time.Second))
	fmt.Fprintf(w, "report: %s\n        %s\n        %s\n", filepath.Join(out.ReportDir, notify.ReportMarkdown),
		filepath.Join(out.ReportDir, notify.ReportText), filepath.Join(out.ReportDir, notify.ReportJSON))
	fmt.Fprintf(w, "finding %s: 'pgbisect report %s' shows it, 'pgbisect post %s' posts it\n", out.Finding.ID, st.ID, st.ID)
}

// bisectPrintCulprits prints the outcome and culprits of a bisection of
// one point.
func bisectPrintCulprits(w io.Writer, st *bisect.State) {
	fmt.Fprintf(w, "bisection %s: %s\n%s\n", st.ID, st.Outcome, st.Summary)
	for i, c := range st.Culprits {
		last := st.Commits[c.Last]
		fmt.Fprintf(w, "\nculprit %d: %s %s\n  author %s, %s\n  %s against %s (fresh samples)\n", i+1, last.Short(), last.Subject,
			last.Author, last.Date.Format("2006-01-02"), st.Effect(c.Result), st.Commits[c.Parent].Short())
		if len(c.Candidates) > 1 {
			fmt.Fprintf(w, "  a range of %d candidates: %s\n", len(c.Candidates), c.Note)
			for _, i := range c.Candidates {
				fmt.Fprintf(w, "    %s %s\n", st.Commits[i].Short(), st.Commits[i].Subject)
			}
		}
	}
}

// bisectWall is how long the bisection took, start to outcome (a finished
// bisection resumed later is saved again).
func bisectWall(st *bisect.State) time.Duration {
	end := st.Updated
	if n := len(st.Events); n > 0 && st.Done() {
		end = st.Events[n-1].Time
	}
	return end.Sub(st.Started)
}
