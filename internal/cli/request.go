package cli

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/jobs"
)

func init() {
	register(command{
		Name:    "request",
		Summary: "queue work for the daemon: request bisect -s SCENARIO --good A --bad B [bisect flags]",
		Run:     requestRun,
	})
}

func requestRun(ctx context.Context, env *Env) error {
	if len(env.Args) == 0 || env.Args[0] == "-h" || env.Args[0] == "--help" {
		fmt.Fprintln(env.Stderr, "Usage: pgbisect request bisect -s SCENARIO --good REV --bad REV [bisect flags] [--config FILE] [--state DIR] [--db URL]")
		fmt.Fprintln(env.Stderr, "\nQueues a bisection for the daemon ('pgbisect daemon'); 'pgbisect status' shows the queue.")
		fmt.Fprintln(env.Stderr, "Any flag of 'pgbisect bisect' may follow (--metric, --point, --set, --post, ...).")
		if len(env.Args) == 0 {
			return usageError("say what to request: bisect")
		}
		return nil
	}
	if env.Args[0] != "bisect" {
		return usageError("unknown request %q: the daemon takes 'bisect' requests", env.Args[0])
	}
	req, flags, err := requestParse(&Env{Args: env.Args[1:], Stdout: env.Stdout, Stderr: env.Stderr, Log: env.Log})
	if err != nil {
		return err
	}
	cfg, err := flags.load()
	if err != nil {
		return err
	}
	requester := "unknown"
	if u, err := user.Current(); err == nil {
		requester = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		requester += "@" + h
	}
	req.Requester = requester
	st, done, err := openResults(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer done()
	q, err := jobs.NewQueue(st)
	if err != nil {
		return err
	}
	job, err := q.Enqueue(ctx, req, firstOf(*flags.class, cfg.Machine.Class))
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "queued job %d for machine class %s: bisect %s; follow it with 'pgbisect status'\n", job.ID, job.Queue, strings.Join(req.Args(), " "))
	return nil
}

// requestParse parses a bisect request's flags, those of 'pgbisect bisect',
// into the request, with the scenario path made absolute (the daemon runs
// elsewhere) and checked.
func requestParse(env *Env) (app.BisectRequest, commonFlags, error) {
	fs := newFlags(env, "request bisect", "-s SCENARIO --good REV --bad REV [bisect flags]")
	request := bisectFlags(fs)
	fs.Bool("json", false, "(ignored: the daemon logs the result)")
	flags := addStoreFlags(fs)
	flags.class = fs.String("class", "", "the machine `CLASS` to run on, e.g. bench-2core (default: machine.class, else default)")
	pos, err := parseFlags(fs, env)
	if err != nil {
		return app.BisectRequest{}, flags, err
	}
	if len(pos) > 0 {
		return app.BisectRequest{}, flags, usageError("unexpected argument %q: give revisions with --good and --bad", pos[0])
	}
	req := request()
	if req.Resume == "" && (req.Scenario == "" || req.Good == "" || req.Bad == "") {
		return req, flags, usageError("a bisect request needs -s SCENARIO, --good REV and --bad REV")
	}
	if err := req.Validate(); err != nil {
		return req, flags, err
	}
	if req.Scenario != "" {
		if abs, err := filepath.Abs(req.Scenario); err == nil {
			req.Scenario = abs
		}
		if _, err := os.Stat(req.Scenario); err != nil {
			return req, flags, usageError("scenario %s: %v", req.Scenario, err)
		}
	}
	return req, flags, nil
}
