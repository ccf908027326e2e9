package app

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// BisectFlags declares the flags of a bisection on fs and returns the
// function that gives the request once fs is parsed: the inverse of
// BisectRequest.Args. 'pgbisect bisect', 'pgbisect request bisect' and a
// bisect command in a GitHub comment share them.
func BisectFlags(fs *flag.FlagSet) func() BisectRequest {
	var req BisectRequest
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
	sets := SetFlag{}
	fs.Var(sets, "set", "set a scenario variable: `var=value` (repeatable)")
	fs.StringVar(&req.ClientBin, "client-bin", "", "directory of the pgbench and psql used for every run (default: bench.client_bin, else the good commit's build)")
	fs.BoolVar(&req.KeepClusters, "keep-clusters", false, "keep cluster directories for debugging")
	fs.BoolVar(&req.NoRevertCheck, "no-revert-check", false, "do not check the culprits by reverting them on top of the bad commit")
	profileRuns := fs.Int("profile-runs", DefaultProfileRuns, "CPU-profile each confirmed culprit and its parent with perf this many runs each (0: no profiles)")
	fs.BoolVar(&req.ProfileFramePointers, "profile-frame-pointers", false, "profile builds made with -fno-omit-frame-pointer (a separate build; the first is a full one) for exact inclusive shares")
	guided := fs.Bool("profile-guided", DefaultProfileGuided, "once the endpoints differ, CPU-profile them (3 runs each) and try first the commits that touch\nthe files of the functions whose share grew (docs/bisect.md, \"Profile-guided search\")")
	return func() BisectRequest {
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

// Request parses the arguments of 'pgbisect bisect' an older pgbisect
// queued. Their --config, --state, --repo and --db were the daemon's, and
// still are; --json meant nothing in a job.
func (l *LegacyJob) Request() (BisectRequest, error) {
	fs := flag.NewFlagSet("bisect", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	request := BisectFlags(fs)
	for _, name := range []string{"config", "state", "repo", "db"} {
		fs.String(name, "", "")
	}
	fs.Bool("json", false, "")
	err := fs.Parse(l.Argv)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		return BisectRequest{}, fmt.Errorf("a bisect job queued by an older pgbisect as %q: %v; queue it again with 'pgbisect request bisect'", l.Argv, err)
	}
	req := request()
	req.Requester = l.Requester
	return req, nil
}

// SetFlag collects repeated --set var=value flags: scenario variables.
type SetFlag map[string]string

func (f SetFlag) String() string { return "" }

// Set implements flag.Value.
func (f SetFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("--set %q: want variable=value, e.g. --set scale=100", s)
	}
	f[k] = v
	return nil
}
