package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Job statuses.
const (
	JobQueued  = "queued"
	JobRunning = "running"
	JobDone    = "done"
	JobFailed  = "failed"
)

// Job is an on-demand request for the daemon ("bisect this range").
type Job struct {
	ID   int64
	Kind string
	// Args is the request as JSON, as its producer defines it: pgbisect
	// queues internal/app requests (app.Encode), never a command line. Jobs
	// queued before that hold {"argv": [...]}, which internal/cli reads
	// with the flags of 'pgbisect bisect'.
	Args     json.RawMessage
	Status   string
	Error    string
	Worker   string
	Progress string
	// Attempts counts claims, so a job that keeps killing its worker shows.
	Attempts int
	Created  time.Time
	Started  time.Time // zero until claimed
	Finished time.Time // zero until finished
}

// Enqueue adds a job and returns its id.
func (s *Store) Enqueue(ctx context.Context, kind string, args json.RawMessage) (int64, error) {
	if kind == "" {
		return 0, errors.New("enqueueing a job: kind is required")
	}
	var id int64
	if err := s.db.QueryRow(ctx, "INSERT INTO jobs (kind, args) VALUES ($1, $2) RETURNING id",
		kind, jsonOr(args, "{}")).Scan(&id); err != nil {
		return 0, fmt.Errorf("enqueueing a %s job: %w", kind, err)
	}
	return id, nil
}

const jobColumns = `id, kind, args, status, error, worker, progress, attempts, created_at, started_at, finished_at`

func scanJob(row pgx.Row) (Job, error) {
	var j Job
	var started, finished *time.Time
	err := row.Scan(&j.ID, &j.Kind, &j.Args, &j.Status, &j.Error, &j.Worker, &j.Progress, &j.Attempts, &j.Created, &started, &finished)
	j.Started, j.Finished = nullTime(started), nullTime(finished)
	return j, err
}

// Claim takes the oldest queued job (of one of kinds, when given) for
// worker and marks it running. It returns nil and no error when there is
// nothing to do. Concurrent claimers, on this machine or others, never get
// the same job: the row is locked with FOR UPDATE SKIP LOCKED, so a second
// claimer skips it instead of waiting for it.
func (s *Store) Claim(ctx context.Context, worker string, kinds ...string) (*Job, error) {
	j, err := scanJob(s.db.QueryRow(ctx, `
		UPDATE jobs SET status = 'running', worker = $1, started_at = now(), attempts = attempts + 1, progress = ''
		WHERE id = (
			SELECT id FROM jobs
			WHERE status = 'queued' AND (coalesce(cardinality($2::text[]), 0) = 0 OR kind = ANY($2))
			ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING `+jobColumns, worker, kinds))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claiming a job: %w", err)
	}
	return &j, nil
}

// SetProgress records a running job's progress line ("bisect: 5 of ~9
// commits measured"), shown by "pgbisect status".
func (s *Store) SetProgress(ctx context.Context, id int64, progress string) error {
	if _, err := s.db.Exec(ctx, "UPDATE jobs SET progress = $2 WHERE id = $1", id, progress); err != nil {
		return fmt.Errorf("recording progress of job %d: %w", id, err)
	}
	return nil
}

// Finish marks a job done, or failed with jobErr's message when jobErr is
// not nil.
func (s *Store) Finish(ctx context.Context, id int64, jobErr error) error {
	status, msg := JobDone, ""
	if jobErr != nil {
		status, msg = JobFailed, jobErr.Error()
	}
	tag, err := s.db.Exec(ctx, "UPDATE jobs SET status = $2, error = $3, finished_at = now() WHERE id = $1", id, status, msg)
	if err != nil {
		return fmt.Errorf("finishing job %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("finishing job %d: %w", id, ErrNotFound)
	}
	return nil
}

// Requeue puts the jobs worker was running back in the queue, keeping their
// place (the queue is ordered by id). A daemon calls it when it starts, so
// the job a SIGTERM or a crash interrupted is resumed. It returns how many
// jobs it requeued.
func (s *Store) Requeue(ctx context.Context, worker string) (int, error) {
	tag, err := s.db.Exec(ctx, "UPDATE jobs SET status = 'queued' WHERE status = 'running' AND worker = $1", worker)
	if err != nil {
		return 0, fmt.Errorf("requeueing the jobs of %s: %w", worker, err)
	}
	return int(tag.RowsAffected()), nil
}

// Job returns job id, or an error wrapping ErrNotFound.
func (s *Store) Job(ctx context.Context, id int64) (Job, error) {
	j, err := scanJob(s.db.QueryRow(ctx, "SELECT "+jobColumns+" FROM jobs WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return j, fmt.Errorf("job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return j, fmt.Errorf("reading job %d: %w", id, err)
	}
	return j, nil
}

// Jobs lists jobs in queue order, keeping only those with one of statuses
// when any are given.
func (s *Store) Jobs(ctx context.Context, statuses ...string) ([]Job, error) {
	rows, err := s.db.Query(ctx, "SELECT "+jobColumns+` FROM jobs
		WHERE coalesce(cardinality($1::text[]), 0) = 0 OR status = ANY($1) ORDER BY id`, statuses)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("listing jobs: %w", err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}
