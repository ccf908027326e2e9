package intake

// Answers as a job runs (issue 15, item 5): the reply to a command is
// edited at the job's milestones, read from the job's events in the results
// store, so the job may run on any machine; at the end the result is
// posted in the same thread. How far each answer has gone is kept in the
// store (github_commands.progress_seq), so a restarted bot neither repeats
// an edit nor misses one, and the result comment carries a marker that
// finds it again after a crash between posting it and recording it.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

// maxEventsPerFollow bounds the events one answer reads per Follow: a
// bisection makes thousands (builds, samples); the rest are read next time.
const maxEventsPerFollow = 2000

// Follow brings the answers of the jobs queued from comments up to date:
// one pass, meant to run after every poll. An answer gets an edit only when
// a milestone was reached since the last pass (a bisection started, its
// endpoints verified, each culprit confirmed, its outcome, the end), so a
// job of hours costs a handful of GitHub requests. It returns how many
// answers were edited or finished. An answer that fails (GitHub or the
// store unavailable) is left where it was, to be tried at the next pass.
func (d *Dispatcher) Follow(ctx context.Context) (int, error) {
	// One follower at a time per repository (a polling daemon and a
	// webhook's serve may both run): the second sees the first's progress.
	unlock, err := d.o.Store.Lock(ctx, "github-answers:"+d.o.Intake.Repo())
	if err != nil {
		return 0, err
	}
	defer unlock()
	as, err := d.o.Store.OpenAnswers(ctx, d.o.Intake.Repo(), d.o.FollowFor)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []string
	for _, a := range as {
		did, err := d.follow(ctx, a)
		if err != nil {
			d.o.Log.Warn("following a job for its answer", slog.String("job", a.JobID), slog.Int("issue", a.Issue), slog.String("err", err.Error()))
			errs = append(errs, err.Error())
			if notify.RateLimited(err) {
				break // the others wait for the next pass
			}
			continue
		}
		if did {
			n++
		}
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("%d of %d answers not brought up to date: %s", len(errs), len(as), strings.Join(errs, "; "))
	}
	return n, nil
}

// follow reads a's new events and edits or finishes its answer.
func (d *Dispatcher) follow(ctx context.Context, a store.Answer) (bool, error) {
	evs, err := d.o.Store.Events(ctx, a.Events, a.ProgressSeq, maxEventsPerFollow)
	if err != nil {
		return false, err
	}
	if len(evs) == 0 {
		return false, nil
	}
	var lines []string
	var end *app.Milestone
	seq := a.ProgressSeq
	for i, se := range evs {
		prev := seq
		seq = se.Seq
		e, err := app.Decode(se)
		if err != nil {
			continue // an event this pgbisect cannot read is no milestone
		}
		m := app.MilestoneOf(e)
		if m.End && m.Failed {
			// An attempt failed; River may run the job again.
			pending, err := d.o.Queue.Pending(ctx, a.JobID)
			if err != nil {
				return false, err
			}
			if pending && i == len(evs)-1 {
				// Nothing after it yet: final or not is known once the
				// job leaves running. Read it again next pass.
				seq = prev
				break
			}
			if pending {
				// A retry is under way (its events follow).
				lines = append(lines, "- attempt "+m.Line+"; retried")
				continue
			}
		}
		if m.Line != "" {
			lines = append(lines, "- "+m.Line)
		}
		if m.End {
			end = &m
			break
		}
	}
	a.ProgressSeq = seq
	if len(lines) > 0 {
		a.Progress = strings.TrimPrefix(a.Progress+"\n"+strings.Join(lines, "\n"), "\n")
		if err := d.o.Intake.EditReply(ctx, a.ReplyID, replyBody(a.Reply, a.Progress)); err != nil {
			if !notify.Uneditable(err) {
				return false, err // tried again next pass
			}
			// A deleted reply, a locked issue: the result is still posted.
			d.o.Log.Warn("a reply cannot be edited; its milestones are skipped", slog.Int64("reply", a.ReplyID), slog.String("err", err.Error()))
		}
	}
	if end != nil && a.FinalID == 0 {
		id, err := d.postResult(ctx, a, *end)
		if err != nil {
			// The milestones are shown; the result is posted next pass.
			if serr := d.o.Store.SaveProgress(ctx, a, false); serr != nil {
				d.o.Log.Warn("recording an answer's progress", slog.String("err", serr.Error()))
			}
			return false, err
		}
		a.FinalID = id
	}
	if err := d.o.Store.SaveProgress(ctx, a, end != nil); err != nil {
		return false, err
	}
	return len(lines) > 0 || end != nil, nil
}

// resultMarker starts the result comment of a's command, so that it is
// found, not posted again, when the bot stopped between posting it and
// recording it.
func resultMarker(a store.Answer) string {
	return fmt.Sprintf("<!-- pgbisect:result %d-%d -->", a.CommentID, a.LineNo)
}

// postResult posts the job's result in the command's thread, once, and
// returns the comment's ID.
func (d *Dispatcher) postResult(ctx context.Context, a store.Answer, m app.Milestone) (int64, error) {
	mark := resultMarker(a)
	if id, err := d.o.Intake.FindComment(ctx, a.Issue, mark); err != nil || id != 0 {
		return id, err
	}
	body, err := d.resultBody(ctx, a, m)
	if err != nil {
		return 0, err
	}
	return d.o.Intake.Reply(ctx, a.Issue, mark+"\n"+body)
}

// resultBody is the result comment: the finding's report (with a link to
// its dashboard page), a comparison's verdicts, or why the job failed.
func (d *Dispatcher) resultBody(ctx context.Context, a store.Answer, m app.Milestone) (string, error) {
	head := fmt.Sprintf("@%s job %s (`%s`)", a.Login, a.JobID, a.Command)
	switch {
	case m.Failed:
		return fmt.Sprintf("%s %s.", head, m.Line), nil
	case m.Finding != "":
		sf, err := d.o.Store.Finding(ctx, m.Finding)
		if err != nil {
			return "", err
		}
		f, err := finding.Unmarshal(sf.Report)
		if err != nil {
			return "", fmt.Errorf("finding %s: %w", m.Finding, err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s finished: **%s**\n\n", head, notify.Title(f))
		if d.o.DashboardURL != "" {
			fmt.Fprintf(&b, "The finding: %s/findings/%s\n\n", d.o.DashboardURL, f.ID)
		}
		var posted []string
		for _, p := range sf.Posts {
			if p.Issue != 0 && (p.Action == finding.ActionCreated || p.Action == finding.ActionCommented) {
				posted = append(posted, fmt.Sprintf("#%d (%s)", p.Issue, p.Action))
			}
		}
		switch {
		case len(posted) > 0:
			fmt.Fprintf(&b, "Culprit issues: %s.\n\n", strings.Join(posted, ", "))
		case len(f.Culprits) > 0:
			b.WriteString("Each culprit gets its issue (or a comment on the open one) as findings are posted.\n\n")
		}
		b.WriteString(notify.Markdown(f, notify.Options{MaxLen: notify.MaxBody - b.Len() - 200}))
		return b.String(), nil
	case m.Result != "":
		return fmt.Sprintf("%s finished:\n\n```\n%s\n```", head, m.Result), nil
	}
	return fmt.Sprintf("%s finished.", head), nil
}

// replyBody is the reply with its milestones, the oldest left out (and
// said so) where all would not fit in a comment.
func replyBody(reply, progress string) string {
	body := reply + "\n\n" + progress
	if len(body) <= notify.MaxBody {
		return body
	}
	const cut = "- … earlier milestones left out\n"
	keep := progress[len(progress)-(notify.MaxBody-len(reply)-len(cut)-2):]
	if i := strings.IndexByte(keep, '\n'); i >= 0 {
		keep = keep[i+1:]
	}
	return reply + "\n\n" + cut + keep
}
