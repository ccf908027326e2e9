package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/nightly"
	"github.com/pgbisect/pgbisect/store"
)

func init() {
	register(command{
		Name:    "status",
		Summary: "show the daemon, the job running and its progress, the queue, the bisections and the last nightly pass",
		Run:     statusRun,
	})
}

// statusReport is what status prints; --json prints it as is.
type statusReport struct {
	Daemon        nightly.Status    `json:"daemon"`
	DaemonRunning bool              `json:"daemon_running"`
	Machine       *nightly.Holder   `json:"machine_busy_with,omitempty"`
	Jobs          []store.Job       `json:"jobs"`
	LastNightly   *store.NightlyRun `json:"last_nightly,omitempty"`
	// Bisections are the unfinished ones and the last finished ones.
	Bisections []statusBisection `json:"bisections"`
}

// statusBisection is one stored bisection, as status lists it.
type statusBisection struct {
	ID       string    `json:"id"`
	Phase    string    `json:"phase"`
	Outcome  string    `json:"outcome,omitempty"`
	Updated  time.Time `json:"updated"`
	Scenario string    `json:"scenario"`
	Metric   string    `json:"metric"`
	Point    string    `json:"point,omitempty"`
	Good     string    `json:"good"`
	Bad      string    `json:"bad"`
	Builds   int       `json:"builds"`
	Samples  int       `json:"samples"`
}

// statusBisections reads the unfinished bisections and the last finished
// ones (all with all).
func statusBisections(ctx context.Context, st *store.Store, all bool) ([]statusBisection, error) {
	infos, err := st.Bisections(ctx)
	if err != nil {
		return nil, err
	}
	var out []statusBisection
	done := 0
	for _, info := range infos {
		if info.Status == string(bisect.PhaseDone) {
			if done++; done > 5 && !all {
				continue
			}
		}
		s, err := st.LoadBisection(ctx, info.ID)
		if err != nil {
			return nil, err
		}
		in := s.Inputs
		out = append(out, statusBisection{ID: s.ID, Phase: string(s.Phase), Outcome: string(s.Outcome), Updated: info.Updated,
			Scenario: strings.TrimSuffix(filepath.Base(in.Scenario), ".yaml"), Metric: in.Metric, Point: in.Point,
			Good: in.Good, Bad: in.Bad, Builds: s.BuildsDone, Samples: s.SamplesTaken})
	}
	return out, nil
}

func statusRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "status", "[--json] [--all]")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	all := fs.Bool("all", false, "list every finished job, not only the last 10")
	flags := addStoreFlags(fs)
	pos, err := parseFlags(fs, env)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("unexpected argument %q", pos[0])
	}
	cfg, err := flags.load()
	if err != nil {
		return err
	}
	var rep statusReport
	if rep.Daemon, rep.DaemonRunning, err = nightly.ReadStatus(cfg.StateDir); err != nil {
		return err
	}
	if h, held, err := nightly.MachineHolder(cfg.StateDir); err == nil && held {
		rep.Machine = &h
	}
	st, done, err := openResults(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer done()
	jobs, err := st.Jobs(ctx)
	if err != nil {
		return err
	}
	var finished []store.Job
	for _, j := range jobs {
		if j.Status == store.JobQueued || j.Status == store.JobRunning {
			rep.Jobs = append(rep.Jobs, j)
		} else {
			finished = append(finished, j)
		}
	}
	if !*all && len(finished) > 10 {
		finished = finished[len(finished)-10:]
	}
	rep.Jobs = append(finished, rep.Jobs...)
	if rep.Bisections, err = statusBisections(ctx, st, *all); err != nil {
		return err
	}
	if last, err := st.LastNightly(ctx, cfg.Branch); err == nil {
		rep.LastNightly = &last
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if *asJSON {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = env.Stdout.Write(append(data, '\n'))
		return err
	}
	statusPrint(env.Stdout, rep, time.Now())
	return nil
}

func statusPrint(w io.Writer, rep statusReport, now time.Time) {
	d := rep.Daemon
	switch {
	case rep.DaemonRunning:
		fmt.Fprintf(w, "daemon: running, pid %d, worker %s, up %s\n", d.PID, d.Worker, statusAge(now, d.Started))
		if !d.NextNightly.IsZero() {
			fmt.Fprintf(w, "next nightly pass: %s (in %s)\n", d.NextNightly.Local().Format("2006-01-02 15:04 MST"), d.NextNightly.Sub(now).Round(time.Minute))
		}
	case d.PID != 0:
		fmt.Fprintf(w, "daemon: not running (pid %d stopped %s ago)\n", d.PID, statusAge(now, d.Stopped))
	default:
		fmt.Fprintln(w, "daemon: not running (start it with 'pgbisect daemon')")
	}
	if c := d.Current; c != nil && rep.DaemonRunning {
		what := c.Kind
		if c.ID != 0 {
			what = fmt.Sprintf("%s job %d", c.Kind, c.ID)
		}
		fmt.Fprintf(w, "running: %s for %s\n", what, statusAge(now, c.Started))
		if c.Progress != "" {
			fmt.Fprintf(w, "  %s\n", c.Progress)
		}
	} else if rep.Machine != nil {
		fmt.Fprintf(w, "machine: busy with %s\n", rep.Machine)
	} else {
		fmt.Fprintln(w, "machine: idle")
	}
	if l := d.Last; l != nil {
		fmt.Fprintf(w, "last job: %s %s, %s ago", l.Kind, l.Result, statusAge(now, l.Finished))
		if l.Error != "" {
			fmt.Fprintf(w, ": %s", l.Error)
		}
		fmt.Fprintln(w)
	}
	if n := rep.LastNightly; n != nil {
		fmt.Fprintf(w, "last nightly pass: %s at %s, %s, started %s ago\n", n.Branch, build.Short(n.Commit), n.Status, statusAge(now, n.Started))
	}
	statusPrintBisections(w, rep.Bisections, now)
	if len(rep.Jobs) == 0 {
		fmt.Fprintln(w, "queue: empty")
		return
	}
	fmt.Fprintln(w, "\nqueue:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATUS\tAGE\tTRIES\tPROGRESS / ERROR\tARGS")
	for _, j := range rep.Jobs {
		note := j.Progress
		if j.Error != "" {
			note = j.Error
		}
		if len(note) > 70 {
			note = note[:67] + "..."
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, j.Kind, j.Status, statusAge(now, j.Created), j.Attempts, note, statusArgs(jobArgs(j)))
	}
	tw.Flush()
}

func statusPrintBisections(w io.Writer, bs []statusBisection, now time.Time) {
	if len(bs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nbisections (resume an unfinished one with 'pgbisect bisect --resume ID'):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPHASE\tUPDATED\tBUILDS\tSAMPLES\tWHAT")
	for _, b := range bs {
		phase := b.Phase
		if b.Outcome != "" {
			phase += ": " + b.Outcome
		}
		what := b.Scenario + " " + b.Metric
		if b.Point != "" {
			what += " at " + b.Point
		}
		fmt.Fprintf(tw, "%s\t%s\t%s ago\t%d\t%d\t%s %s..%s\n", b.ID, phase, statusAge(now, b.Updated), b.Builds, b.Samples,
			what, build.Short(b.Good), build.Short(b.Bad))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// jobArgs are a queued job's request as the flags of its command.
func jobArgs(j store.Job) []string {
	r, err := jobRequest(j)
	if err != nil {
		return []string{"(" + err.Error() + ")"}
	}
	if b, ok := r.(app.BisectRequest); ok {
		return b.Args()
	}
	return nil
}

// statusArgs shows a job's arguments on one line, scenario files by name.
func statusArgs(argv []string) string {
	short := make([]string, len(argv))
	for i, a := range argv {
		if filepath.IsAbs(a) && strings.HasSuffix(a, ".yaml") {
			a = filepath.Base(a)
		}
		short[i] = a
	}
	s := strings.Join(short, " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func statusAge(now, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
