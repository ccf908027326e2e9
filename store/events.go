package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Event is one step of a job's progress (a build started, a sample taken,
// a culprit named), as its producer defines it.
type Event struct {
	JobID string
	// Seq numbers the job's events 1, 2, 3, ... without gaps, in the order
	// they were committed.
	Seq  int64
	At   time.Time
	Kind string
	// Payload is the event's body as its producer defines it (opaque).
	Payload json.RawMessage
}

// EventsChannel is the LISTEN/NOTIFY channel AppendEvent notifies, with the
// job id as the payload, when it commits an event.
const EventsChannel = "pgbisect_events"

// ErrStopFollowing is returned by a FollowEvents callback to stop following
// without an error.
var ErrStopFollowing = errors.New("stop following events")

// defaultFollowPoll is how often a follower re-reads the job's events when no
// notification came, so a lost notification delays an event, never loses it.
const defaultFollowPoll = 5 * time.Second

// followBatch is how many events a follower reads per query.
const followBatch = 1000

// AppendEvent adds an event to job jobID and returns its sequence number.
// Concurrent appenders of one job, in this process or others, get
// consecutive numbers: the next number is taken from the job's counter row,
// whose lock is held until the event is committed, so events commit in
// sequence order and a follower reading "after seq n" never skips one.
// Followers are notified on EventsChannel when the event commits.
func (s *Store) AppendEvent(ctx context.Context, jobID, kind string, payload json.RawMessage) (int64, error) {
	if jobID == "" || kind == "" {
		return 0, fmt.Errorf("appending an event: job id (%q) and kind (%q) are required", jobID, kind)
	}
	if len(payload) > 0 && !json.Valid(payload) {
		return 0, fmt.Errorf("appending a %s event to job %s: the payload is not valid JSON", kind, jobID)
	}
	var seq int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `
			INSERT INTO job_event_seqs AS c (job_id, last_seq) VALUES ($1, 1)
			ON CONFLICT (job_id) DO UPDATE SET last_seq = c.last_seq + 1
			RETURNING last_seq`, jobID).Scan(&seq); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO job_events (job_id, seq, kind, payload) VALUES ($1, $2, $3, $4)",
			jobID, seq, kind, jsonOr(payload, "{}")); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", EventsChannel, jobID)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("appending a %s event to job %s: %w", kind, jobID, err)
	}
	return seq, nil
}

// Events returns up to limit events of job jobID with sequence numbers
// above afterSeq, in order; limit <= 0 means all of them. A reader that
// remembers the last Seq it saw continues with Events(ctx, job, last, n).
func (s *Store) Events(ctx context.Context, jobID string, afterSeq int64, limit int) ([]Event, error) {
	return readEvents(ctx, s.db, jobID, afterSeq, limit)
}

// LastEvents returns the last n events of job jobID, in order: what a
// page showing a job's latest lines reads, however long the job ran.
func (s *Store) LastEvents(ctx context.Context, jobID string, n int) ([]Event, error) {
	rows, err := s.db.Query(ctx, "SELECT job_id, seq, at, kind, payload FROM job_events WHERE job_id = $1 ORDER BY seq DESC LIMIT $2", jobID, n)
	if err != nil {
		return nil, fmt.Errorf("reading the events of job %s: %w", jobID, err)
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
		var e Event
		err := row.Scan(&e.JobID, &e.Seq, &e.At, &e.Kind, &e.Payload)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the events of job %s: %w", jobID, err)
	}
	slices.Reverse(evs)
	return evs, nil
}

// readEvents is Events on db: the store's pool or a follower's connection.
func readEvents(ctx context.Context, db interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, jobID string, afterSeq int64, limit int) ([]Event, error) {
	q := "SELECT job_id, seq, at, kind, payload FROM job_events WHERE job_id = $1 AND seq > $2 ORDER BY seq"
	args := []any{jobID, afterSeq}
	if limit > 0 {
		q += " LIMIT $3"
		args = append(args, limit)
	}
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the events of job %s: %w", jobID, err)
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
		var e Event
		err := row.Scan(&e.JobID, &e.Seq, &e.At, &e.Kind, &e.Payload)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the events of job %s: %w", jobID, err)
	}
	return evs, nil
}

// FollowEvents calls fn with every event of job jobID after afterSeq, in
// order, and then with each new event as it is appended, by this process or
// any other sharing the database. It returns nil when fn returns
// ErrStopFollowing, fn's other errors as they are, and ctx.Err() when ctx
// ends.
//
// It reads and listens on EventsChannel on a connection of its own (taken
// out of the pool, so followers never starve other users, and closed on
// return), and re-reads the job's events every few seconds even without a
// notification, so an event whose notification was lost is delivered late,
// never skipped. If the connection fails, FollowEvents returns the error; the
// caller continues from the last Seq fn saw.
func (s *Store) FollowEvents(ctx context.Context, jobID string, afterSeq int64, fn func(Event) error) error {
	if s.pool == nil {
		return errors.New("following events needs a store opened with Open (this one is bound to a transaction)")
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("following the events of job %s: %w", jobID, err)
	}
	// The connection leaves the pool: it must not hand its LISTEN to the
	// pool's next user, and a pool of a few connections must not be
	// exhausted by followers that each hold one for hours.
	conn := pc.Hijack()
	defer conn.Close(context.Background()) //nolint:errcheck // nothing to do about it
	// LISTEN before the first read: an event committed between the two is
	// then both read and notified, never neither.
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{EventsChannel}.Sanitize()); err != nil {
		return followErr(ctx, jobID, err)
	}
	poll := s.followPoll
	if poll <= 0 {
		poll = defaultFollowPoll
	}
	last := afterSeq
	for {
		// Deliver everything after last, a batch at a time.
		for {
			evs, err := readEvents(ctx, conn, jobID, last, followBatch)
			if err != nil {
				return followErr(ctx, jobID, err)
			}
			for _, e := range evs {
				if err := fn(e); err != nil {
					if errors.Is(err, ErrStopFollowing) {
						return nil
					}
					return err
				}
				last = e.Seq
			}
			if len(evs) < followBatch {
				break
			}
		}
		// Wait for a notification about this job, or for the poll period.
		if err := waitForJob(ctx, conn, jobID, poll); err != nil {
			return followErr(ctx, jobID, err)
		}
	}
}

// waitForJob returns when conn receives a notification about jobID, when
// poll has passed (nil in both cases), or with the error that ended the
// wait. Notifications about other jobs are skipped.
func waitForJob(ctx context.Context, conn *pgx.Conn, jobID string, poll time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, poll)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(wctx)
		if err != nil {
			if ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) {
				return nil // the poll period passed: re-read
			}
			return err
		}
		if n.Payload == jobID {
			return nil
		}
	}
}

// followErr gives ctx's error when ctx ended (the caller stopped
// following), and err with context otherwise.
func followErr(ctx context.Context, jobID string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("following the events of job %s: %w", jobID, err)
}
