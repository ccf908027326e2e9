package cli

import (
	"context"
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

func bisectRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "bisect", "-s SCENARIO --good REV --bad REV [flags]\n       pgbisect bisect --resume ID")
	request := app.BisectFlags(fs)
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
	cfg, err := flags.load(env.Stderr)
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
	if err := bisectPrint(env.Stdout, out, *asJSON); err != nil {
		return err
	}
	return bisectStatus(out.State.Outcome)
}

// bisectStatus is the error that makes pgbisect exit with the status of a
// bisection that ended with outcome o (bisectExitCode), nil for found.
func bisectStatus(o bisect.Outcome) error {
	code := bisectExitCode(o)
	if code == 0 {
		return nil
	}
	return &exitStatus{code: code, err: fmt.Errorf("exit %d: outcome %s (docs/cli.md lists the statuses)", code, o)}
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
