package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ETag returns the stored ETag and body of a GET (notify.ETagCache).
func (s *Store) ETag(ctx context.Context, key string) (etag string, body []byte, ok bool, err error) {
	err = s.db.QueryRow(ctx, "SELECT etag, body FROM github_etags WHERE key = $1", key).Scan(&etag, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("reading a GitHub ETag: %w", err)
	}
	return etag, body, true, nil
}

// PutETag keeps the ETag and body of a GET's answer (notify.ETagCache).
func (s *Store) PutETag(ctx context.Context, key, etag string, body []byte) error {
	_, err := s.db.Exec(ctx, `INSERT INTO github_etags (key, etag, body) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET etag = excluded.etag, body = excluded.body, updated_at = now()`, key, etag, body)
	if err != nil {
		return fmt.Errorf("keeping a GitHub ETag: %w", err)
	}
	return nil
}

// CommentCursor returns how far the comments of repo have been read (zero
// before the first poll).
func (s *Store) CommentCursor(ctx context.Context, repo string) (time.Time, error) {
	var t time.Time
	err := s.db.QueryRow(ctx, "SELECT since FROM github_cursors WHERE repo = $1", repo).Scan(&t)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the comment cursor of %s: %w", repo, err)
	}
	return t, nil
}

// SetCommentCursor moves the cursor of repo forward (never back).
func (s *Store) SetCommentCursor(ctx context.Context, repo string, since time.Time) error {
	_, err := s.db.Exec(ctx, `INSERT INTO github_cursors (repo, since) VALUES ($1, $2)
		ON CONFLICT (repo) DO UPDATE SET since = greatest(github_cursors.since, excluded.since)`, repo, since)
	if err != nil {
		return fmt.Errorf("moving the comment cursor of %s: %w", repo, err)
	}
	return nil
}

// GitHubCommand is one command the bot acted on.
type GitHubCommand struct {
	CommentID int64
	LineNo    int // which command of the comment, from 0
	Repo      string
	Issue     int
	Login     string
	Command   string
	// JobID is the job it queued, "" for an answer only; Events is the
	// job's events stream (store.AppendEvent), which its answer follows.
	JobID  string
	Events string
	// Outcome says what the bot did ("queued", "refused: read permission",
	// "error: unknown scenario").
	Outcome string
}

// ErrCommandSeen is returned by TakeCommand for a command already acted on.
var ErrCommandSeen = errors.New("command already acted on")

// TakeCommand records that the bot acts on c, and runs queue in the same
// transaction to queue its job (queue may be nil for an answer only): the
// job is queued exactly once however often the comment is polled or
// delivered, and a crash between the two loses neither. It returns
// ErrCommandSeen when c was acted on before. queue returns the job's id
// and its events stream.
func (s *Store) TakeCommand(ctx context.Context, c GitHubCommand, queue func(tx pgx.Tx) (jobID, events string, err error)) (string, error) {
	var jobID string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO github_commands (comment_id, line_no, repo, issue, login, command, outcome)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
			c.CommentID, c.LineNo, c.Repo, c.Issue, c.Login, c.Command, c.Outcome)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrCommandSeen
		}
		if queue == nil {
			return nil
		}
		var events string
		if jobID, events, err = queue(tx); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE github_commands SET job_id = $3, events = nullif($4, '') WHERE comment_id = $1 AND line_no = $2",
			c.CommentID, c.LineNo, jobID, events)
		return err
	})
	if err != nil && !errors.Is(err, ErrCommandSeen) {
		return "", fmt.Errorf("recording the command of comment %d: %w", c.CommentID, err)
	}
	return jobID, err
}

// JobsRequestedSince counts the jobs login asked for since t, for the
// per-user rate limit.
func (s *Store) JobsRequestedSince(ctx context.Context, login string, t time.Time) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, "SELECT count(*) FROM github_commands WHERE login = $1 AND at >= $2 AND job_id IS NOT NULL", login, t).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("counting the jobs %s asked for: %w", login, err)
	}
	return n, nil
}

// CommandsSince counts the commands login gave since t, whatever the bot
// did with them (queued, answered, refused), for the hourly limit on
// commands.
func (s *Store) CommandsSince(ctx context.Context, login string, t time.Time) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, "SELECT count(*) FROM github_commands WHERE login = $1 AND at >= $2", login, t).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("counting the commands %s gave: %w", login, err)
	}
	return n, nil
}

// JobQueuedBy returns the login whose command in repo queued job jobID,
// or "" when no command did (a nightly pass, a job from the web or the
// command line): who may cancel it as its own.
func (s *Store) JobQueuedBy(ctx context.Context, repo, jobID string) (string, error) {
	var login string
	err := s.db.QueryRow(ctx, "SELECT login FROM github_commands WHERE repo = $1 AND job_id = $2 LIMIT 1", repo, jobID).Scan(&login)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("finding who queued job %s: %w", jobID, err)
	}
	return login, nil
}

// SeenDelivery records a webhook delivery ID and reports whether it was
// seen before (a replay).
func (s *Store) SeenDelivery(ctx context.Context, id string) (bool, error) {
	tag, err := s.db.Exec(ctx, "INSERT INTO github_deliveries (delivery_id) VALUES ($1) ON CONFLICT DO NOTHING", id)
	if err != nil {
		return false, fmt.Errorf("recording webhook delivery %s: %w", id, err)
	}
	return tag.RowsAffected() == 0, nil
}

// ForgetDelivery removes a delivery recorded by SeenDelivery, so that its
// redelivery is acted on: the webhook forgets a delivery it could not act
// on (GitHub or the store unavailable).
func (s *Store) ForgetDelivery(ctx context.Context, id string) error {
	if _, err := s.db.Exec(ctx, "DELETE FROM github_deliveries WHERE delivery_id = $1", id); err != nil {
		return fmt.Errorf("forgetting webhook delivery %s: %w", id, err)
	}
	return nil
}

// SetReply records the bot's reply to a command (its comment ID and body),
// the comment whose milestones OpenAnswers' caller edits.
func (s *Store) SetReply(ctx context.Context, commentID int64, lineNo int, replyID int64, body string) error {
	_, err := s.db.Exec(ctx, "UPDATE github_commands SET reply_id = $3, reply = $4 WHERE comment_id = $1 AND line_no = $2",
		commentID, lineNo, replyID, body)
	if err != nil {
		return fmt.Errorf("recording the reply to comment %d: %w", commentID, err)
	}
	return nil
}

// Answer is a queued command whose job is followed in its thread: the
// reply is edited at milestones and the finding posted at the end.
type Answer struct {
	GitHubCommand
	ReplyID int64
	// Reply is the reply as first posted; Progress the milestone lines
	// shown under it so far, read from the job's events up to ProgressSeq.
	Reply       string
	Progress    string
	ProgressSeq int64
	// FinalID is the comment with the job's result, once posted.
	FinalID int64
}

// OpenAnswers returns the commands of repo whose job is followed and not
// finished, oldest first. Commands older than maxAge are given up (a job
// cancelled before it started never ends its events).
func (s *Store) OpenAnswers(ctx context.Context, repo string, maxAge time.Duration) ([]Answer, error) {
	rows, err := s.db.Query(ctx, `SELECT comment_id, line_no, repo, issue, login, command, job_id, events, outcome,
			reply_id, reply, progress, progress_seq, coalesce(final_id, 0)
		FROM github_commands
		WHERE repo = $1 AND job_id IS NOT NULL AND events IS NOT NULL AND reply_id IS NOT NULL AND closed_at IS NULL
			AND at > now() - make_interval(secs => $2)
		ORDER BY at, comment_id, line_no`, repo, maxAge.Seconds())
	if err != nil {
		return nil, fmt.Errorf("listing the answers of %s to follow: %w", repo, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Answer, error) {
		var a Answer
		err := r.Scan(&a.CommentID, &a.LineNo, &a.Repo, &a.Issue, &a.Login, &a.Command, &a.JobID, &a.Events, &a.Outcome,
			&a.ReplyID, &a.Reply, &a.Progress, &a.ProgressSeq, &a.FinalID)
		return a, err
	})
}

// SaveProgress records how far a's answer has gone: the events read up to
// a.ProgressSeq, the lines shown, the final comment, and closes it when
// closed.
func (s *Store) SaveProgress(ctx context.Context, a Answer, closed bool) error {
	_, err := s.db.Exec(ctx, `UPDATE github_commands SET progress_seq = $3, progress = $4, final_id = nullif($5, 0),
			closed_at = CASE WHEN $6 THEN now() END
		WHERE comment_id = $1 AND line_no = $2`, a.CommentID, a.LineNo, a.ProgressSeq, a.Progress, a.FinalID, closed)
	if err != nil {
		return fmt.Errorf("recording the progress of the answer to comment %d: %w", a.CommentID, err)
	}
	return nil
}
