package intake

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/base/strictyaml"
	"github.com/pgbisect/pgbisect/notify"
)

// Request is a parsed command.
type Request struct {
	// Kind is the command ("bisect", "compare", "status", "cancel").
	Kind string
	// Request is what a command that queues a job asks for, checked.
	Request app.Request
	// Job is the job a cancel names.
	Job int64
	// Summary says in one line what will run, for the reply.
	Summary string
	// AnswerOnly marks commands that queue nothing (status, cancel).
	AnswerOnly bool
}

// commandNames are the commands the bot takes in comments.
var commandNames = []string{"bisect", "compare", "status", "cancel"}

// queuesJob says whether command cmd queues a job (the others answer).
func queuesJob(cmd string) bool { return cmd == "bisect" || cmd == "compare" }

// Commands parses the words after the bot's handle into requests:
// "bisect SCENARIO --good A --bad B [the flags of 'pgbisect bisect']",
// "compare SCENARIO A B [--point P] [--min-effect X] [--max-samples N]",
// "compare SCENARIO BASE --patch URL|--pr N [...]", "status", "cancel ID".
// A scenario is a name from Scenarios (copy-single), never a path; each
// request passes app.Check, as one from any other front end does.
type Commands struct {
	Scenarios app.Scenarios
	// Fetcher fetches the patches of --patch URL from allowlisted hosts;
	// Intake the pull requests' diffs of --pr N. Nil: compare takes no
	// patches.
	Fetcher *notify.PatchFetcher
	Intake  *notify.Intake
}

// Parse parses one command. Its error is the reply: it names the mistake
// and suggests the fix ("did you mean copy-single?").
func (c Commands) Parse(ctx context.Context, args []string) (Request, error) {
	if len(args) == 0 {
		return Request{}, errors.New("there is no command after the handle: try `bisect SCENARIO --good REV --bad REV`, `compare SCENARIO A B`, `status` or `cancel ID`")
	}
	for _, a := range args {
		// JSON, the queue's format, would turn such bytes into U+FFFD:
		// the job would not run the revision written.
		if !utf8.ValidString(a) {
			return Request{}, fmt.Errorf("%q is not valid UTF-8: write revisions and names as text", a)
		}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "status":
		return Request{Kind: "status", AnswerOnly: true}, nil
	case "cancel":
		if len(rest) != 1 {
			return Request{}, errors.New("`cancel` takes one job ID, as `status` lists them")
		}
		id, err := strconv.ParseInt(rest[0], 10, 64)
		if err != nil {
			return Request{}, fmt.Errorf("job ID %q is not a number: `cancel` takes the ID `status` lists", rest[0])
		}
		return Request{Kind: "cancel", Job: id, AnswerOnly: true}, nil
	case "bisect":
		return c.bisect(rest)
	case "compare":
		return c.compare(ctx, rest)
	}
	hint := ""
	if c := strictyaml.Closest(cmd, commandNames); c != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", c)
	}
	return Request{}, fmt.Errorf("unknown command %q%s: the bot takes %s", cmd, hint, strings.Join(commandNames, ", "))
}

// bisect parses "bisect SCENARIO --good A --bad B [flags]" (or -s SCENARIO,
// or --resume ID).
func (c Commands) bisect(rest []string) (Request, error) {
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		sc, err := c.Scenarios.Name(rest[0])
		if err != nil {
			return Request{}, err
		}
		rest = append([]string{"-s", sc}, rest[1:]...)
	}
	fs := flag.NewFlagSet("bisect", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	request := app.BisectFlags(fs)
	// The command line's flags that mean nothing here are taken and
	// ignored, as they always were: the bot's own config, state, store
	// and machine class decide.
	for _, name := range []string{"config", "state", "repo", "db", "class"} {
		fs.String(name, "", "")
	}
	fs.Bool("json", false, "")
	if err := fs.Parse(rest); err != nil {
		return Request{}, fmt.Errorf("bisect: %s", flagError(fs, err))
	}
	if fs.NArg() > 0 {
		return Request{}, fmt.Errorf("bisect: unexpected argument %q: give revisions with --good and --bad", fs.Arg(0))
	}
	req := request()
	if req.Resume == "" && (req.Scenario == "" || req.Good == "" || req.Bad == "") {
		return Request{}, errors.New("bisect: a bisect request needs -s SCENARIO, --good REV and --bad REV")
	}
	if err := req.Validate(); err != nil {
		return Request{}, fmt.Errorf("bisect: %v", err)
	}
	checked, err := app.Check(req, c.Scenarios)
	if err != nil {
		return Request{}, fmt.Errorf("bisect: %v", err)
	}
	req = checked.(app.BisectRequest)
	return queued(req, "bisect "+strings.Join(req.Args(), " "))
}

// compare parses "compare SCENARIO A B [flags]" and "compare SCENARIO BASE
// --patch URL|--pr N [flags]".
func (c Commands) compare(ctx context.Context, rest []string) (Request, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	point := fs.String("point", "", "")
	minEffect := fs.Float64("min-effect", 0, "")
	maxSamples := fs.Int("max-samples", 0, "")
	var urls, prs listFlag
	fs.Var(&urls, "patch", "")
	fs.Var(&prs, "pr", "")
	var pos []string
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return Request{}, fmt.Errorf("compare: %v (it takes --point, --min-effect, --max-samples, --patch URL and --pr N)", err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos, rest = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	patched := len(urls) > 0 || len(prs) > 0
	if patched && len(pos) != 2 {
		return Request{}, errors.New("compare with --patch or --pr takes a scenario and the revision the patch applies to: `compare SCENARIO BASE --patch URL`")
	}
	if !patched && len(pos) != 3 {
		return Request{}, errors.New("compare takes a scenario and two revisions: `compare SCENARIO A B`, or a base and a patch: `compare SCENARIO BASE --patch URL` or `--pr N`")
	}
	sc, err := c.Scenarios.Name(pos[0])
	if err != nil {
		return Request{}, err
	}
	req := app.CompareRequest{Scenario: sc, A: pos[1], Point: *point, MinEffect: *minEffect, MaxSamples: *maxSamples}
	summary := fmt.Sprintf("compare %s %s", sc, pos[1])
	if !patched {
		req.B = pos[2]
		summary += " " + pos[2]
	} else {
		if req.PatchData, err = c.patches(ctx, urls, prs); err != nil {
			return Request{}, err
		}
		for _, p := range req.PatchData {
			summary += fmt.Sprintf(" + %s (%d bytes)", p.Name, len(p.Data))
		}
	}
	checked, err := app.Check(req, c.Scenarios)
	if err != nil {
		return Request{}, fmt.Errorf("compare: %v", err)
	}
	return queued(checked, summary)
}

// queued is the request of a command that queues r, once r is known to
// travel in the queue (JSON has no NaN: a number Check lets through may
// still not).
func queued(r app.Request, summary string) (Request, error) {
	if _, _, err := app.Encode(r); err != nil {
		return Request{}, err
	}
	return Request{Kind: r.Kind(), Request: r, Summary: summary}, nil
}

// patches fetches the patches a compare names, URLs first, each checked
// to parse as a patch so that a mistake is answered at once, not when the
// job runs.
func (c Commands) patches(ctx context.Context, urls, prs []string) ([]app.PatchData, error) {
	if c.Fetcher == nil || c.Intake == nil {
		return nil, errors.New("compare: this bot takes no patches")
	}
	var out []app.PatchData
	var total int
	add := func(name string, data []byte) error {
		if _, err := build.ParsePatches(name, data); err != nil {
			return fmt.Errorf("compare: %s is not a patch pgbisect can read: %v", name, err)
		}
		if total += len(data); total > app.MaxRequestPatchBytes {
			return fmt.Errorf("compare: the patches are more than %d KiB together", app.MaxRequestPatchBytes>>10)
		}
		out = append(out, app.PatchData{Name: name, Data: data})
		return nil
	}
	for _, u := range urls {
		data, err := c.Fetcher.Fetch(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("compare --patch: %v", err)
		}
		name := u
		if i := strings.LastIndexByte(u, '/'); i >= 0 && i+1 < len(u) {
			name = u[i+1:]
		}
		if err := add(name, data); err != nil {
			return nil, err
		}
	}
	for _, s := range prs {
		n, err := strconv.Atoi(strings.TrimPrefix(s, "#"))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("compare --pr %q: give the number of a pull request of %s", s, c.Intake.Repo())
		}
		data, err := c.Intake.PullDiff(ctx, n, c.Fetcher.MaxBytes)
		if err != nil {
			return nil, fmt.Errorf("compare --pr: %v", err)
		}
		if err := add(fmt.Sprintf("pull-%d.diff", n), data); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// flagError says in one line which flag was wrong, with the closest one
// for an unknown flag.
func flagError(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err.Error()
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	hint := ""
	if c := strictyaml.Closest(name, names); c != "" {
		hint = fmt.Sprintf(" (did you mean --%s?)", c)
	}
	return fmt.Sprintf("unknown flag --%s%s: a bisect command takes the flags of 'pgbisect bisect'", name, hint)
}

// listFlag is a repeatable string flag.
type listFlag []string

func (s *listFlag) String() string     { return strings.Join(*s, " ") }
func (s *listFlag) Set(v string) error { *s = append(*s, v); return nil }
