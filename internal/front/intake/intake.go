// Package intake acts on requests made to the bot in GitHub comments: it
// reads them (notify.Intake, by polling or from a webhook), checks who may
// ask, parses them into the application's typed requests (Commands: the
// command line's flags, app.Check), queues each job exactly once on River
// (store.TakeCommand records the comment in the transaction that queues
// it) and answers in the same thread.
package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

// Options configure a Dispatcher. Intake, Store and Queue are required.
type Options struct {
	Intake *notify.Intake
	Store  *store.Store
	// Commands parses the commands (its Intake defaults to Intake).
	Commands Commands
	// Queue is where the commands' jobs go: NewQueue's River queue.
	Queue Queue
	// DashboardURL, when set, is where `pgbisect serve` is reachable; the
	// reply links the job's page (DashboardURL/jobs/ID), the final answer
	// the finding's (DashboardURL/findings/ID).
	DashboardURL string
	// FollowFor is how long a queued job's answer is followed before it is
	// given up (a job cancelled before it started never ends). Default:
	// 30 days.
	FollowFor time.Duration
	// RateLimit is how many jobs one user may queue per RateWindow.
	// Default: 10 per 24 hours.
	RateLimit  int
	RateWindow time.Duration
	// CommandLimit is how many commands of any kind (status and cancel,
	// refusals and mistakes too) one user may give per hour; past it the
	// bot answers once and then stays silent until the hour has passed.
	// Default: 30.
	CommandLimit int
	Now          func() time.Time
	Log          *slog.Logger
}

// Dispatcher acts on the commands of one repository.
type Dispatcher struct{ o Options }

// New returns a Dispatcher.
func New(o Options) (*Dispatcher, error) {
	if o.Intake == nil || o.Store == nil || o.Queue == nil {
		return nil, errors.New("intake: Intake, Store and Queue are required")
	}
	if o.Commands.Intake == nil {
		o.Commands.Intake = o.Intake
	}
	if o.RateLimit <= 0 {
		o.RateLimit = 10
	}
	if o.RateWindow <= 0 {
		o.RateWindow = 24 * time.Hour
	}
	if o.CommandLimit <= 0 {
		o.CommandLimit = 30
	}
	if o.FollowFor <= 0 {
		o.FollowFor = 30 * 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.DashboardURL = strings.TrimSuffix(o.DashboardURL, "/")
	return &Dispatcher{o: o}, nil
}

// Poll reads the comments made or edited since the last poll and acts on
// their commands. The cursor moves only after every command was handled,
// so a crash or an error in between loses nothing: the next poll sees the
// same comments again, and the record of handled commands keeps each from
// being acted on twice.
func (d *Dispatcher) Poll(ctx context.Context) (acted int, err error) {
	repo := d.o.Intake.Repo()
	since, err := d.o.Store.CommentCursor(ctx, repo)
	if err != nil {
		return 0, err
	}
	ms, next, err := d.o.Intake.Poll(ctx, since)
	if err != nil {
		return 0, err
	}
	for _, m := range ms {
		did, err := d.Handle(ctx, m)
		if err != nil {
			return acted, err
		}
		if did {
			acted++
		}
	}
	return acted, d.o.Store.SetCommentCursor(ctx, repo, next)
}

// Webhook is the http.Handler of GitHub's issue_comment webhook: it checks
// the signature against secret, ignores a replayed delivery, and acts on
// the comment's commands.
func (d *Dispatcher) Webhook(secret []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		delivery, ms, err := d.o.Intake.Webhook(r.Context(), r, secret)
		if errors.Is(err, notify.ErrBadSignature) {
			d.o.Log.Warn("webhook delivery with a bad signature", slog.String("remote", r.RemoteAddr))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if delivery != "" {
			seen, err := d.o.Store.SeenDelivery(r.Context(), delivery)
			if err != nil {
				http.Error(w, "results store unavailable", http.StatusServiceUnavailable)
				return
			}
			if seen {
				fmt.Fprintln(w, "replayed delivery: nothing to do")
				return
			}
		}
		for _, m := range ms {
			if _, err := d.Handle(r.Context(), m); err != nil {
				// GitHub redelivers on request (with the same delivery
				// ID, so it is forgotten: the commands acted on are
				// recorded by comment and line); polling picks it up too.
				if delivery != "" {
					if err := d.o.Store.ForgetDelivery(context.WithoutCancel(r.Context()), delivery); err != nil {
						d.o.Log.Warn("a failed delivery's redelivery will be ignored", slog.String("delivery", delivery), slog.String("err", err.Error()))
					}
				}
				http.Error(w, "could not act on the command: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintf(w, "%d command(s)\n", len(ms))
	})
}

// Handle acts on one command, at most once: it returns false for a
// command acted on before. An error means nothing was recorded and the
// command should be tried again (GitHub or the store was unavailable).
//
// Nothing is answered before the commenter's permission is known, and a
// commenter without it gets one short refusal per comment (on its first
// command), the comment's other commands recorded unanswered: a comment
// of many lines from anyone costs at most one reply. Past the hourly
// CommandLimit a user's commands are recorded and refused with one reply.
func (d *Dispatcher) Handle(ctx context.Context, m notify.Mention) (bool, error) {
	cmd := store.GitHubCommand{CommentID: m.CommentID, LineNo: m.Index, Repo: d.o.Intake.Repo(), Issue: m.Issue,
		Login: m.User, Command: m.Line}
	record := func(outcome string) (bool, error) {
		cmd.Outcome = outcome
		if _, err := d.o.Store.TakeCommand(ctx, cmd, nil); errors.Is(err, store.ErrCommandSeen) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		return true, nil
	}
	answer := func(outcome, reply string) (bool, error) {
		did, err := record(outcome)
		if did {
			d.reply(ctx, m, reply)
		}
		return did, err
	}
	access, err := d.o.Intake.Access(ctx, m.User)
	if err != nil {
		return false, err
	}
	if !access.Allowed {
		if m.Index > 0 {
			return record("refused: " + access.Why)
		}
		return answer("refused: "+access.Why, fmt.Sprintf("@%s sorry, only users with write permission on %s, or listed in the bot's github.allow, can start jobs (you have %s).",
			m.User, d.o.Intake.Repo(), access.Why))
	}
	n, err := d.o.Store.CommandsSince(ctx, m.User, d.o.Now().Add(-time.Hour))
	if err != nil {
		return false, err
	}
	if n >= d.o.CommandLimit {
		if n > d.o.CommandLimit {
			return record("rate limited: commands")
		}
		return answer("rate limited: commands", fmt.Sprintf("@%s you have given %d commands in the last hour, the most one user may: the bot ignores your commands until the hour has passed.",
			m.User, n))
	}
	if m.Dropped > 0 {
		return answer(fmt.Sprintf("refused: %d commands past the first %d", m.Dropped, notify.MaxCommandsPerComment),
			fmt.Sprintf("@%s the bot takes at most %d commands from one comment: the %d after them were not acted on.", m.User, notify.MaxCommandsPerComment, m.Dropped))
	}
	if m.Err != "" {
		return answer("error: "+m.Err, fmt.Sprintf("@%s I could not read that command: %s.", m.User, m.Err))
	}
	limited := func() (bool, error) {
		n, err := d.o.Store.JobsRequestedSince(ctx, m.User, d.o.Now().Add(-d.o.RateWindow))
		if err != nil || n < d.o.RateLimit {
			return false, err
		}
		return answer("rate limited", fmt.Sprintf("@%s you have queued %d jobs in the last %s, the most one user may: please try again later.",
			m.User, n, d.o.RateWindow))
	}
	// A command that queues a job is held to the rate limit before it is
	// parsed: parsing fetches its patches.
	if len(m.Args) > 0 && queuesJob(m.Args[0]) {
		if did, err := limited(); did || err != nil {
			return did, err
		}
	}
	// A patch that cannot be fetched is answered, not retried: retrying
	// would hold back every later command until its host answers, and the
	// reply says what failed, so the user can ask again.
	req, err := d.o.Commands.Parse(ctx, m.Args)
	if err != nil {
		return answer("error: "+err.Error(), fmt.Sprintf("@%s %s", m.User, err))
	}
	if req.Kind == "cancel" && !access.Maintainer {
		who, err := d.o.Store.JobQueuedBy(ctx, d.o.Intake.Repo(), strconv.FormatInt(req.Job, 10))
		if err != nil {
			return false, err
		}
		if !strings.EqualFold(who, m.User) {
			return answer("refused: cancel of another's job", fmt.Sprintf("@%s job %d was not queued by a comment of yours: you may cancel only your own jobs (a maintainer, with admin or maintain permission on %s, may cancel any).",
				m.User, req.Job, d.o.Intake.Repo()))
		}
	}
	if req.AnswerOnly {
		// Recorded first, so a comment polled again (or edited) runs
		// its cancel once, not at every poll that lists it.
		if did, err := record("answered"); !did || err != nil {
			return did, err
		}
		text, err := d.o.Queue.Answer(ctx, req)
		if err != nil {
			text = fmt.Sprintf("`%s` failed: %v", req.Kind, err)
		}
		d.reply(ctx, m, fmt.Sprintf("@%s %s", m.User, text))
		return true, nil
	}
	if did, err := limited(); did || err != nil {
		return did, err
	}
	if b, ok := req.Request.(app.BisectRequest); ok {
		b.Requester = "github:" + m.User
		// The finding is posted like any: the culprits' issues.
		b.Post = true
		req.Request = b
	}
	cmd.Outcome = "queued"
	jobID, err := d.o.Store.TakeCommand(ctx, cmd, func(tx pgx.Tx) (string, string, error) { return d.o.Queue.Enqueue(ctx, tx, req) })
	if errors.Is(err, store.ErrCommandSeen) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	d.o.Log.Info("queued a job from GitHub", slog.String("job", jobID), slog.String("by", m.User), slog.Int("issue", m.Issue))
	if err := d.o.Intake.React(ctx, m.CommentID, "eyes"); err != nil {
		d.o.Log.Warn("reacting to a command", slog.String("err", err.Error()))
	}
	reply := fmt.Sprintf("@%s queued as job %s: %s.", m.User, jobID, req.Summary)
	if d.o.DashboardURL != "" {
		reply += fmt.Sprintf(" Follow it at %s/jobs/%s.", d.o.DashboardURL, jobID)
	}
	reply += " This comment is edited as it runs, and the result is posted in this thread."
	if id := d.reply(ctx, m, reply); id != 0 {
		// The reply is what Follow edits at the job's milestones.
		if err := d.o.Store.SetReply(ctx, m.CommentID, m.Index, id, reply); err != nil {
			d.o.Log.Warn("recording the reply", slog.String("job", jobID), slog.String("err", err.Error()))
		}
	}
	return true, nil
}

// reply answers in the comment's thread and returns the reply's ID (0 when
// it failed). The command is already recorded: a reply that fails is
// logged, not retried, so nothing is answered twice.
func (d *Dispatcher) reply(ctx context.Context, m notify.Mention, body string) int64 {
	id, err := d.o.Intake.Reply(ctx, m.Issue, body)
	if err != nil {
		d.o.Log.Warn("answering a command", slog.Int("issue", m.Issue), slog.String("err", err.Error()))
	}
	return id
}
