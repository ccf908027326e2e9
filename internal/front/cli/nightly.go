package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/app/nightly"
	"github.com/pgbisect/pgbisect/notify"
)

func init() {
	register(command{
		Name:    "nightly",
		Summary: "one nightly pass: fetch, build the branch head, compare it with the last night, bisect what got slower",
		Run:     nightlyRun,
	})
}

func nightlyRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "nightly", "[--force] [--wait] [flags]")
	force := fs.Bool("force", false, "measure the head even if it has not moved since the last pass")
	wait := fs.Bool("wait", false, "wait while another pgbisect job uses the machine (default: refuse)")
	noPost := fs.Bool("no-post", false, "record findings but post nothing (they wait for 'pgbisect post --pending')")
	flags := addStoreFlags(fs)
	if err := parseNoArgs(fs, env, ""); err != nil {
		return err
	}
	a, _, err := flags.open(ctx, env)
	if err != nil {
		return err
	}
	defer a.Close()
	res, err := a.Nightly(ctx, app.NightlyRequest{Force: *force, Wait: *wait, Deliver: !*noPost}, progress(env.Stderr))
	if res != nil {
		nightlyPrint(env.Stdout, res)
	}
	return err
}

// nightlyPrint prints what a pass did.
func nightlyPrint(w io.Writer, res *nightly.Result) {
	r := res.Run
	fmt.Fprintf(w, "nightly %s at %s: %s\n", r.Branch, build.Short(r.Commit), r.Status)
	if res.Detail.Base != "" {
		fmt.Fprintf(w, "compared with %s\n", build.Short(res.Detail.Base))
	}
	for _, m := range res.Detail.Results {
		point := m.Point
		if point != "" {
			point = " " + point
		}
		fmt.Fprintf(w, "  %s%s: %s %+.1f%%, %s: %s (p=%.3g, n=%d)\n", m.Scenario, point, m.Metric, 100*m.Change, m.Direction, m.Verdict, m.P, m.N)
	}
	for _, c := range res.Detail.ChangePoints {
		fmt.Fprintf(w, "  change point %s %s at %s (%+.1f%% over the series): re-measured %s..%s: %s %+.1f%%, %s: %s\n",
			c.Scenario, c.Metric, build.Short(c.At), 100*c.RelChange, build.Short(c.Before), build.Short(c.Until), c.Metric, 100*c.Change, c.Direction, c.Verdict)
	}
	for _, f := range res.Findings {
		fmt.Fprintf(w, "finding %s: %s\n", f.ID, notify.Title(f))
	}
	if res.Detail.Error != "" {
		fmt.Fprintf(w, "error: %s\n", res.Detail.Error)
	}
}
