package cli

// Requests from GitHub comments (issue 15): the wiring only. notify reads
// the comments and answers, internal/front/intake acts on each command once,
// this file parses commands with the command line's own flags and queues
// their jobs on River in the transaction that records the comment.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/base/strictyaml"
	"github.com/pgbisect/pgbisect/internal/front/config"
	"github.com/pgbisect/pgbisect/internal/front/intake"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

// webhookSecretEnv holds the secret GitHub signs webhook deliveries with.
const webhookSecretEnv = "PGBISECT_WEBHOOK_SECRET"

// intakeCommands are the commands the bot takes in comments.
var intakeCommands = []string{"bisect", "compare", "status", "cancel"}

// newDispatcher returns the dispatcher of the configured repository's
// comments, queueing jobs for class, or nil when GitHub is not configured
// (no repository or no token).
func newDispatcher(cfg *config.Config, st *store.Store, queue *jobs.Queue, class string, log *slog.Logger) (*intake.Dispatcher, error) {
	gh := cfg.GitHub.Options()
	if gh.Repo == "" || gh.Token == "" {
		return nil, nil
	}
	in, err := notify.NewIntake(notify.IntakeOptions{GitHubOptions: gh, Handle: cfg.GitHub.Handle, Allow: cfg.GitHub.Allow, Cache: st})
	if err != nil {
		return nil, err
	}
	patches := intakePatches{intake: in, fetcher: &notify.PatchFetcher{Allow: cfg.GitHub.PatchHosts, MaxBytes: int64(cfg.GitHub.MaxPatchKiB) << 10}}
	return intake.New(intake.Options{
		Intake: in, Store: st, Parse: intakeParser(cfg, patches), DashboardURL: cfg.GitHub.DashboardURL,
		RateLimit: cfg.GitHub.RateLimit, Log: log,
		Queue: func(ctx context.Context, tx pgx.Tx, req intake.Request, by string) (string, string, error) {
			r, _, err := app.DecodeRequest(req.Kind, req.Body)
			if err != nil {
				return "", "", err
			}
			if b, ok := r.(app.BisectRequest); ok {
				b.Requester = "github:" + by
				// The finding is posted like any: the culprits' issues.
				b.Post = true
				r = b
			}
			row, err := queue.EnqueueTx(ctx, tx, r, class)
			if err != nil {
				return "", "", err
			}
			return strconv.FormatInt(row.ID, 10), jobs.EventsOfRow(row), nil
		},
		Answer: func(ctx context.Context, req intake.Request, by string) (string, error) {
			return intakeAnswer(ctx, queue, req)
		},
		Pending: func(ctx context.Context, jobID string) (bool, error) {
			id, err := strconv.ParseInt(jobID, 10, 64)
			if err != nil {
				return false, err
			}
			return queue.Pending(ctx, id)
		},
	})
}

// intakeAnswer runs status and cancel.
func intakeAnswer(ctx context.Context, queue *jobs.Queue, req intake.Request) (string, error) {
	if req.Kind == "cancel" {
		var id int64
		if err := json.Unmarshal(req.Body, &id); err != nil {
			return "", err
		}
		row, err := queue.Cancel(ctx, id)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("job %d (%s) is %s.", row.ID, row.Kind, row.State), nil
	}
	js, err := queue.Jobs(ctx, 0)
	if err != nil {
		return "", err
	}
	var running, queued []string
	for _, j := range js {
		line := fmt.Sprintf("job %d %s (%s)", j.ID, j.Kind, j.Class)
		if j.State == "running" {
			running = append(running, line+" on "+j.Machine+", started "+j.Started.UTC().Format(time.RFC3339))
		} else {
			queued = append(queued, line+", "+j.State)
		}
	}
	if len(js) == 0 {
		return "nothing is running or queued.", nil
	}
	out := fmt.Sprintf("%d running, %d queued:", len(running), len(queued))
	for _, l := range append(running, queued...) {
		out += "\n- " + l
	}
	return out, nil
}

// intakeParser parses a comment's command with the flags of the command
// line: "bisect SCENARIO --good A --bad B [bisect flags]", "compare
// SCENARIO A B [--point P] [--min-effect X] [--max-samples N]", "compare
// SCENARIO BASE --patch URL|--pr N [...]", "status", "cancel ID". A scenario is a name from the config's scenario directory
// (copy-single), never a path.
func intakeParser(cfg *config.Config, patches intakePatches) func(ctx context.Context, args []string) (intake.Request, error) {
	return func(ctx context.Context, args []string) (intake.Request, error) {
		if len(args) == 0 {
			return intake.Request{}, errors.New("there is no command after the handle: try `bisect SCENARIO --good REV --bad REV`, `compare SCENARIO A B`, `status` or `cancel ID`")
		}
		for _, a := range args {
			// JSON, the queue's format, would turn such bytes into U+FFFD:
			// the job would not run the revision written.
			if !utf8.ValidString(a) {
				return intake.Request{}, fmt.Errorf("%q is not valid UTF-8: write revisions and names as text", a)
			}
		}
		cmd, rest := args[0], args[1:]
		switch cmd {
		case "status":
			return intake.Request{Kind: "status", AnswerOnly: true}, nil
		case "cancel":
			if len(rest) != 1 {
				return intake.Request{}, errors.New("`cancel` takes one job ID, as `status` lists them")
			}
			id, err := strconv.ParseInt(rest[0], 10, 64)
			if err != nil {
				return intake.Request{}, fmt.Errorf("job ID %q is not a number: `cancel` takes the ID `status` lists", rest[0])
			}
			body, _ := json.Marshal(id)
			return intake.Request{Kind: "cancel", Body: body, AnswerOnly: true}, nil
		case "bisect":
			if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
				sc, err := intakeScenario(cfg, rest[0])
				if err != nil {
					return intake.Request{}, err
				}
				rest = append([]string{"-s", sc}, rest[1:]...)
			}
			parsed, _, err := requestParse(&Env{Args: rest, Stdout: io.Discard, Stderr: io.Discard, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				return intake.Request{}, fmt.Errorf("bisect: %s", strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
			}
			checked, err := app.Check(parsed, scenarioCatalog(cfg))
			if err != nil {
				return intake.Request{}, fmt.Errorf("bisect: %v", err)
			}
			req := checked.(app.BisectRequest)
			return intakeRequest(req, "bisect "+strings.Join(req.Args(), " "))
		case "compare":
			fs := flag.NewFlagSet("compare", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			point := fs.String("point", "", "")
			minEffect := fs.Float64("min-effect", 0, "")
			maxSamples := fs.Int("max-samples", 0, "")
			var urls, prs buildFlagList
			fs.Var(&urls, "patch", "")
			fs.Var(&prs, "pr", "")
			var pos []string
			for len(rest) > 0 {
				if err := fs.Parse(rest); err != nil {
					return intake.Request{}, fmt.Errorf("compare: %v (it takes --point, --min-effect, --max-samples, --patch URL and --pr N)", err)
				}
				if fs.NArg() == 0 {
					break
				}
				pos, rest = append(pos, fs.Arg(0)), fs.Args()[1:]
			}
			patched := len(urls) > 0 || len(prs) > 0
			if patched && len(pos) != 2 {
				return intake.Request{}, errors.New("compare with --patch or --pr takes a scenario and the revision the patch applies to: `compare SCENARIO BASE --patch URL`")
			}
			if !patched && len(pos) != 3 {
				return intake.Request{}, errors.New("compare takes a scenario and two revisions: `compare SCENARIO A B`, or a base and a patch: `compare SCENARIO BASE --patch URL` or `--pr N`")
			}
			sc, err := intakeScenario(cfg, pos[0])
			if err != nil {
				return intake.Request{}, err
			}
			req := app.CompareRequest{Scenario: sc, A: pos[1], Point: *point, MinEffect: *minEffect, MaxSamples: *maxSamples}
			summary := fmt.Sprintf("compare %s %s", sc, pos[1])
			if !patched {
				req.B = pos[2]
				summary += " " + pos[2]
			} else {
				if req.PatchData, err = patches.fetch(ctx, urls, prs); err != nil {
					return intake.Request{}, err
				}
				for _, p := range req.PatchData {
					summary += fmt.Sprintf(" + %s (%d bytes)", p.Name, len(p.Data))
				}
			}
			checked, err := app.Check(req, scenarioCatalog(cfg))
			if err != nil {
				return intake.Request{}, fmt.Errorf("compare: %v", err)
			}
			return intakeRequest(checked, summary)
		}
		hint := ""
		if c := strictyaml.Closest(cmd, intakeCommands); c != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", c)
		}
		return intake.Request{}, fmt.Errorf("unknown command %q%s: the bot takes %s", cmd, hint, strings.Join(intakeCommands, ", "))
	}
}

func intakeRequest(r app.Request, summary string) (intake.Request, error) {
	kind, body, err := app.Encode(r)
	if err != nil {
		return intake.Request{}, err
	}
	return intake.Request{Kind: kind, Body: body, Summary: summary}, nil
}

// intakeScenario checks a scenario name ("copy-single") against the
// config's scenario directory, with a hint for a likely typo.
func intakeScenario(cfg *config.Config, name string) (string, error) {
	return scenarioCatalog(cfg).Name(name)
}

// pollComments runs the dispatcher's poll, then brings the answers of the
// jobs it queued up to date (Follow), every interval until ctx ends; a
// failed poll is logged and tried again at the next tick. Without poll
// (only a webhook delivers), it only follows.
func pollComments(ctx context.Context, d *intake.Dispatcher, interval time.Duration, poll bool, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if !poll {
		} else if n, err := d.Poll(ctx); err != nil && ctx.Err() == nil {
			log.Warn("reading GitHub comments", slog.String("err", err.Error()))
		} else if n > 0 {
			log.Info("acted on GitHub comments", slog.Int("commands", n))
		}
		if n, err := d.Follow(ctx); err != nil && ctx.Err() == nil {
			log.Warn("answering on GitHub as jobs run", slog.String("err", err.Error()))
		} else if n > 0 {
			log.Info("answered on GitHub as jobs ran", slog.Int("answers", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// intakePatches fetches the patches a comment's compare names: attachments
// from allowlisted hosts (--patch URL), pull requests' diffs (--pr N).
type intakePatches struct {
	intake  *notify.Intake
	fetcher *notify.PatchFetcher
}

// fetch returns the patches, URLs first, each checked to parse as a patch
// so that a mistake is answered at once, not when the job runs.
func (p intakePatches) fetch(ctx context.Context, urls, prs []string) ([]app.PatchData, error) {
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
		data, err := p.fetcher.Fetch(ctx, u)
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
			return nil, fmt.Errorf("compare --pr %q: give the number of a pull request of %s", s, p.intake.Repo())
		}
		data, err := p.intake.PullDiff(ctx, n, p.fetcher.MaxBytes)
		if err != nil {
			return nil, fmt.Errorf("compare --pr: %v", err)
		}
		if err := add(fmt.Sprintf("pull-%d.diff", n), data); err != nil {
			return nil, err
		}
	}
	return out, nil
}
