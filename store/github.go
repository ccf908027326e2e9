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
	// JobID is the job it queued, "" for an answer only.
	JobID string
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
// ErrCommandSeen when c was acted on before. queue returns the job's id.
func (s *Store) TakeCommand(ctx context.Context, c GitHubCommand, queue func(tx pgx.Tx) (string, error)) (string, error) {
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
		if jobID, err = queue(tx); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE github_commands SET job_id = $3 WHERE comment_id = $1 AND line_no = $2", c.CommentID, c.LineNo, jobID)
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

// SeenDelivery records a webhook delivery ID and reports whether it was
// seen before (a replay).
func (s *Store) SeenDelivery(ctx context.Context, id string) (bool, error) {
	tag, err := s.db.Exec(ctx, "INSERT INTO github_deliveries (delivery_id) VALUES ($1) ON CONFLICT DO NOTHING", id)
	if err != nil {
		return false, fmt.Errorf("recording webhook delivery %s: %w", id, err)
	}
	return tag.RowsAffected() == 0, nil
}
