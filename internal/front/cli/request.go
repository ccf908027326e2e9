package cli

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
)

func init() {
	register(command{
		Name:    "request",
		Summary: "queue work for the daemon: request bisect|compare -s SCENARIO ... (the flags of bisect or compare)",
		Run:     requestRun,
	})
}

func requestRun(ctx context.Context, env *Env) error {
	if len(env.Args) == 0 || env.Args[0] == "-h" || env.Args[0] == "--help" {
		fmt.Fprintln(env.Stderr, "Usage: pgbisect request bisect -s SCENARIO --good REV --bad REV [bisect flags] [--config FILE] [--state DIR] [--db URL]")
		fmt.Fprintln(env.Stderr, "       pgbisect request compare -s SCENARIO A B | BASE --patch FILE... [compare flags] [--config FILE] [--state DIR] [--db URL]")
		fmt.Fprintln(env.Stderr, "\nQueues a bisection or a comparison for the daemon ('pgbisect daemon'); 'pgbisect status' shows the queue.")
		fmt.Fprintln(env.Stderr, "SCENARIO is a name from the config's scenario directory (copy-single), never a file: the daemon may run elsewhere.")
		fmt.Fprintln(env.Stderr, "Any flag of 'pgbisect bisect' may follow (--metric, --point, --set, --post, ...); compare takes")
		fmt.Fprintln(env.Stderr, "--point, --set, --alpha, --min-effect, --max-samples, --max-time and --patch (the patch is carried in the request).")
		if len(env.Args) == 0 {
			return usageError("say what to request: bisect or compare")
		}
		return nil
	}
	var req app.Request
	var flags commonFlags
	var err error
	sub := &Env{Args: env.Args[1:], Stdout: env.Stdout, Stderr: env.Stderr, Log: env.Log}
	switch env.Args[0] {
	case "bisect":
		req, flags, err = requestParse(sub)
	case "compare":
		req, flags, err = requestCompareParse(sub)
	default:
		return usageError("unknown request %q: the daemon takes 'bisect' and 'compare' requests", env.Args[0])
	}
	if err != nil {
		return err
	}
	cfg, err := flags.load(env.Stderr)
	if err != nil {
		return err
	}
	// The daemon, maybe on another machine, runs the scenario of this
	// name from its own directory: a request names it, never a file.
	if req, err = app.Check(req, scenarioCatalog(cfg)); err != nil {
		return usageError("%v", err)
	}
	requester := "unknown"
	if u, err := user.Current(); err == nil {
		requester = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		requester += "@" + h
	}
	if b, ok := req.(app.BisectRequest); ok {
		b.Requester = requester
		req = b
	}
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
	what := ""
	switch r := req.(type) {
	case app.BisectRequest:
		what = "bisect " + strings.Join(r.Args(), " ")
	case app.CompareRequest:
		what = fmt.Sprintf("compare %s %s", r.Scenario, r.A)
		if r.B != "" {
			what += " " + r.B
		}
		for _, p := range r.PatchData {
			what += fmt.Sprintf(" + %s (%d bytes, carried in the request)", p.Name, len(p.Data))
		}
	}
	fmt.Fprintf(env.Stdout, "queued job %d for machine class %s: %s; follow it with 'pgbisect status'\n", job.ID, job.Queue, what)
	return nil
}

// requestCompareParse parses a compare request: the flags of 'pgbisect
// compare' that make sense on another machine. Patch files are read here
// and carried in the request (PatchData): their paths mean nothing where
// the daemon runs.
func requestCompareParse(env *Env) (app.CompareRequest, commonFlags, error) {
	fs := newFlags(env, "request compare", "-s SCENARIO A B [flags]\n       pgbisect request compare -s SCENARIO BASE --patch FILE [--patch FILE ...] [flags]")
	scenario := fs.String("s", "", "scenario `NAME`, from the scenario directory (required)")
	fs.StringVar(scenario, "scenario", "", "scenario name (same as -s)")
	point := fs.String("point", "", "compare only the matrix point `P` (e.g. clients=1)")
	sets := runSetFlag{}
	fs.Var(sets, "set", "set a scenario variable: `var=value` (repeatable)")
	alpha := fs.Float64("alpha", 0, "false \"different\" rate across all looks (default 0.01)")
	minEffect := fs.Float64("min-effect", 0, "smallest relative change that matters, e.g. 0.05 (default 0.03)")
	maxSamples := fs.Int("max-samples", 0, "budget of samples per side and point (default 30)")
	maxTime := fs.Duration("max-time", 0, "wall-clock budget per point (default none)")
	var patches buildFlagList
	fs.Var(&patches, "patch", "apply `FILE` (git diff, git format-patch or an mbox) on top of the one revision given; its content is queued with the request (repeatable, applied in order)")
	flags := addStoreFlags(fs)
	flags.class = fs.String("class", "", "the machine `CLASS` to run on, e.g. bench-2core (default: machine.class, else default)")
	pos, err := parseFlags(fs, env)
	if err != nil {
		return app.CompareRequest{}, flags, err
	}
	if *scenario == "" {
		return app.CompareRequest{}, flags, usageError("-s SCENARIO is required (e.g. -s copy-single)")
	}
	if len(patches) > 0 && len(pos) != 1 {
		return app.CompareRequest{}, flags, usageError("with --patch give one revision, the base the patches apply to (e.g. request compare -s copy-single master --patch fix.patch)")
	}
	if len(patches) == 0 && len(pos) != 2 {
		return app.CompareRequest{}, flags, usageError("give two revisions: the baseline A and the candidate B (e.g. request compare -s copy-single master~10 master)")
	}
	req := app.CompareRequest{Scenario: *scenario, Set: sets, A: pos[0], Point: *point, Alpha: *alpha, MinEffect: *minEffect,
		MaxSamples: *maxSamples, MaxTime: *maxTime}
	if len(pos) == 2 {
		req.B = pos[1]
	}
	total := 0
	for _, f := range patches {
		data, err := os.ReadFile(f)
		if err != nil {
			return req, flags, usageError("patch: %v", err)
		}
		// Refuse here what the daemon would refuse later.
		if _, err := build.ParsePatches(filepath.Base(f), data); err != nil {
			return req, flags, usageError("patch %s: %v", f, err)
		}
		if total += len(data); total > app.MaxRequestPatchBytes {
			return req, flags, usageError("the patches are more than %d KiB together, more than a queued request carries: run 'pgbisect compare --patch' on the benchmark machine", app.MaxRequestPatchBytes>>10)
		}
		req.PatchData = append(req.PatchData, app.PatchData{Name: filepath.Base(f), Data: data})
	}
	return req, flags, nil
}

// requestParse parses a bisect request's flags, those of 'pgbisect bisect',
// into the request; app.Check checks it once the config is known (the
// scenario is a name of its scenario directory: the daemon runs
// elsewhere).
func requestParse(env *Env) (app.BisectRequest, commonFlags, error) {
	fs := newFlags(env, "request bisect", "-s SCENARIO --good REV --bad REV [bisect flags]")
	request := app.BisectFlags(fs)
	fs.Bool("json", false, "(ignored: the daemon logs the result)")
	flags := addStoreFlags(fs)
	flags.class = fs.String("class", "", "the machine `CLASS` to run on, e.g. bench-2core (default: machine.class, else default)")
	if err := parseNoArgs(fs, env, "give revisions with --good and --bad"); err != nil {
		return app.BisectRequest{}, flags, err
	}
	req := request()
	if req.Resume == "" && (req.Scenario == "" || req.Good == "" || req.Bad == "") {
		return req, flags, usageError("a bisect request needs -s SCENARIO, --good REV and --bad REV")
	}
	if err := req.Validate(); err != nil {
		return req, flags, err
	}
	return req, flags, nil
}
