package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/store"
)

func init() {
	register(command{
		Name:    "request",
		Summary: "queue work for the daemon: request bisect -s SCENARIO --good A --bad B [bisect flags]",
		Run:     requestRun,
	})
}

// requestOwnFlags are the request's own flags, not passed on to the job.
var requestOwnFlags = map[string]bool{"config": true, "state": true, "db": true}

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
	argv, own, err := requestSplit(env.Args[1:])
	if err != nil {
		return err
	}
	fs := newFlags(env, "request", "")
	flags := addStoreFlags(fs)
	if _, err := parseFlags(fs, &Env{Args: own, Stderr: env.Stderr}); err != nil {
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
	data, _ := json.Marshal(daemonBisectArgs{Argv: argv, Requester: requester})
	st, done, err := openResults(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer done()
	id, err := st.Enqueue(ctx, "bisect", data)
	if err != nil {
		return err
	}
	queued, err := st.Jobs(ctx, store.JobQueued)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "queued job %d: bisect %s (%d in the queue); follow it with 'pgbisect status'\n", id, strings.Join(argv, " "), len(queued))
	return nil
}

// requestSplit checks a bisect request's arguments and splits them into
// the job's (scenario paths made absolute, since the daemon runs
// elsewhere) and the request's own (--config, --state, --db).
func requestSplit(args []string) (job, own []string, err error) {
	var scenario, good, bad bool
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			return nil, nil, usageError("unexpected argument %q: give revisions with --good and --bad", a)
		}
		takesValue := name != "first-parent" && name != "post" && name != "json" && name != "keep-clusters" && name != "reuse-samples"
		if takesValue && !hasValue {
			if i+1 >= len(args) {
				return nil, nil, usageError("flag %s needs a value", a)
			}
			i++
			value = args[i]
		}
		switch name {
		case "s", "scenario":
			scenario = true
			if abs, err := filepath.Abs(value); err == nil {
				value = abs
			}
			if _, err := os.Stat(value); err != nil {
				return nil, nil, usageError("scenario %s: %v", value, err)
			}
		case "good":
			good = true
		case "bad":
			bad = true
		case "resume":
			scenario, good, bad = true, true, true
		}
		flag := "--" + name
		if name == "s" {
			flag = "--scenario"
		}
		if requestOwnFlags[name] {
			own = append(own, flag, value)
			continue
		}
		if takesValue {
			job = append(job, flag, value)
		} else {
			job = append(job, a)
		}
	}
	if !scenario || !good || !bad {
		return nil, nil, usageError("a bisect request needs -s SCENARIO, --good REV and --bad REV")
	}
	return job, own, nil
}
