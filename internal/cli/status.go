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

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/nightly"
	"github.com/pgbisect/pgbisect/store"
)

func init() {
	register(command{
		Name:    "status",
		Summary: "show the daemon, the job running and its progress, the queue and the last nightly pass",
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
}

func statusRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "status", "[--json] [--all]")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	all := fs.Bool("all", false, "list every finished job, not only the last 10")
	flags := nightlyCommonFlags(fs)
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
	st, err := store.Open(ctx, store.Config{URL: cfg.DB, StateDir: cfg.StateDir, RunAs: cfg.RunAs, Log: env.Log})
	if err != nil {
		return err
	}
	defer st.Close()
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
		var args daemonBisectArgs
		_ = json.Unmarshal(j.Args, &args)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, j.Kind, j.Status, statusAge(now, j.Created), j.Attempts, note, statusArgs(args.Argv))
	}
	tw.Flush()
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
