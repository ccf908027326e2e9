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
	"github.com/pgbisect/pgbisect/internal/base/machinelock"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/store"
)

func init() {
	register(command{
		Name:    "status",
		Summary: "show the machines, the job queue and recent jobs, the bisections and the last nightly pass",
		Run:     statusRun,
	})
}

// statusReport is what status prints; --json prints it as is.
type statusReport struct {
	// Machines joined with 'pgbisect daemon'.
	Machines []store.Machine `json:"machines"`
	// Machine is this machine's lock holder, when busy.
	Machine *machinelock.Holder `json:"machine_busy_with,omitempty"`
	// Jobs are the queued and running jobs and the last finished ones.
	Jobs        []jobs.Job        `json:"jobs"`
	LastNightly *store.NightlyRun `json:"last_nightly,omitempty"`
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
	if err := parseNoArgs(fs, env, ""); err != nil {
		return err
	}
	cfg, err := flags.load(env.Stderr)
	if err != nil {
		return err
	}
	var rep statusReport
	if h, held, err := machinelock.HolderOf(machinelock.Path(cfg.StateDir)); err == nil && held {
		rep.Machine = &h
	}
	st, done, err := openResults(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer done()
	if rep.Machines, err = st.Machines(ctx); err != nil {
		return err
	}
	q, err := jobs.NewQueue(st)
	if err != nil {
		return err
	}
	recent := 10
	if *all {
		recent = 10000
	}
	if rep.Jobs, err = q.Jobs(ctx, recent); err != nil {
		return err
	}
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
	if len(rep.Machines) == 0 {
		fmt.Fprintln(w, "machines: none joined (start one with 'pgbisect daemon')")
	} else {
		fmt.Fprintln(w, "machines:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tCLASS\tHEARTBEAT\tJOB")
		for _, m := range rep.Machines {
			beat := statusAge(now, m.Heartbeat) + " ago"
			if !m.Stopped.IsZero() {
				beat = "stopped " + statusAge(now, m.Stopped) + " ago"
			}
			job := m.JobKey
			if job == "" || !m.Stopped.IsZero() {
				job = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, m.Class, beat, job)
		}
		tw.Flush()
	}
	if rep.Machine != nil {
		h := rep.Machine
		fmt.Fprintf(w, "this machine: busy with pid %d (%s) for %s\n", h.PID, h.Command, statusAge(now, h.Started))
	} else {
		fmt.Fprintln(w, "this machine: idle")
	}
	if n := rep.LastNightly; n != nil {
		fmt.Fprintf(w, "last nightly pass: %s at %s, %s, started %s ago\n", n.Branch, build.Short(n.Commit), n.Status, statusAge(now, n.Started))
	}
	statusPrintBisections(w, rep.Bisections, now)
	if len(rep.Jobs) == 0 {
		fmt.Fprintln(w, "queue: empty")
		return
	}
	if len(rep.Bisections) == 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "jobs (the last finished, then the queue):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tCLASS\tSTATE\tAGE\tTRIES\tMACHINE\tERROR\tARGS")
	for _, j := range rep.Jobs {
		note := j.Error
		if len(note) > 60 {
			note = note[:57] + "..."
		}
		machine := j.Machine
		if machine == "" {
			machine = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", j.ID, j.Kind, j.Class, j.State, statusAge(now, j.Created), j.Attempt,
			machine, note, statusArgs(jobArgs(j)))
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
func jobArgs(j jobs.Job) []string {
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
