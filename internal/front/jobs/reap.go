package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/riverqueue/river"

	"github.com/pgbisect/pgbisect/store"
)

// Reap moves the jobs of dead or paused machines to other workers of their
// class: every River row running for longer than ttl whose key holds no
// live lease (it expired, or the worker died before taking it). A lease
// released or expired less than 10 seconds ago is left alone: a worker
// releases its lease just before River records the job's end, and that
// row is not to be moved. Each move is one transaction:
//
//  1. the old row is finalized as cancelled, if it is still running (a
//     second reaper racing finds it finalized and does nothing);
//  2. the job's lease epoch is bumped (store.FenceOut), so from the commit
//     on every write of the old worker fails its fence;
//  3. a continuation row is inserted: the same kind, arguments and key,
//     queued for the class. It takes over the old row's River unique key,
//     so a job that is one per tick (the nightly) stays one: a new
//     leader's catch-up insert of the same tick finds the continuation and
//     is skipped, where it would find only the cancelled row (River's
//     uniqueness leaves cancelled rows out) and run the tick again. No
//     other live row can hold the key meanwhile: the old row held it while
//     it ran.
//
// Why not River's own retry of the old row: River retries a row only after
// its worker returns, and a dead worker never returns; its rescuer re-runs
// a running row after a fixed time whether or not its worker lives. A new
// row with the same key instead leaves the old one finalized, so a late
// completion by the old worker (River updates a row only while it is
// running) cannot overwrite the new attempt's outcome, and the fence stops
// its writes. Every daemon reaps; the row lock makes it safe.
func Reap(ctx context.Context, st *store.Store, client *river.Client[pgx.Tx], ttl time.Duration) (int, error) {
	type stale struct {
		id          int64
		kind, queue string
		key         string
		args        json.RawMessage
		attempt     int
		maxAttempts int
		attemptedBy string
		uniqueKey   []byte
		uniqueBits  pgtype.Bits
	}
	rows, err := st.Pool().Query(ctx, `
		SELECT j.id, j.kind, j.queue, j.args->>'key', j.args, j.attempt, j.max_attempts, coalesce(j.attempted_by[cardinality(j.attempted_by)], ''),
		       j.unique_key, j.unique_states
		FROM river_job j
		WHERE j.state = 'running' AND j.attempted_at < now() - $1 * interval '1 microsecond'
		  AND coalesce(j.args->>'key', '') <> ''
		  AND NOT EXISTS (SELECT 1 FROM job_leases l
		                  WHERE l.job_id = j.args->>'key' AND l.expires_at > now() - interval '10 seconds')
		ORDER BY j.id`, ttl.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("looking for jobs of dead machines: %w", err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stale, error) {
		var s stale
		err := r.Scan(&s.id, &s.kind, &s.queue, &s.key, &s.args, &s.attempt, &s.maxAttempts, &s.attemptedBy, &s.uniqueKey, &s.uniqueBits)
		return s, err
	})
	if err != nil {
		return 0, fmt.Errorf("looking for jobs of dead machines: %w", err)
	}
	moved := 0
	for _, s := range found {
		done := false
		err := st.InTx(ctx, func(tx pgx.Tx) error {
			done = false
			note := fmt.Sprintf("the lease of %s expired: job %s moved to a new row", s.attemptedBy, s.key)
			tag, err := tx.Exec(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now(),
				errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt, 'error', $2::text, 'trace', ''))
				WHERE id = $1 AND state = 'running'`, s.id, note)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return nil
			}
			live, err := store.FenceOut(ctx, tx, s.key)
			if err != nil {
				return err
			}
			if live {
				// Taken meanwhile by a live worker: leave everything.
				return errRollback
			}
			opts := insertOpts(s.kind, s.queue)
			opts.Queue = s.queue
			opts.UniqueOpts = river.UniqueOpts{} // no key computed here: the old row's is carried over below
			// Attempts left carry over: a job that kills every machine it
			// runs on must not go round for ever.
			opts.MaxAttempts = max(s.maxAttempts-s.attempt, 1)
			res, err := client.InsertTx(ctx, tx, rawArgs{kind: s.kind, json: s.args}, opts)
			if err != nil {
				return fmt.Errorf("queueing the continuation of job %s: %w", s.key, err)
			}
			if s.uniqueKey != nil {
				// River's own key cannot be recomputed from the stored
				// arguments (jsonb reorders and respaces nested objects), so
				// the old row's is carried over as it is.
				if _, err := tx.Exec(ctx, `UPDATE river_job SET unique_key = $2, unique_states = $3 WHERE id = $1`,
					res.Job.ID, s.uniqueKey, s.uniqueBits); err != nil {
					return fmt.Errorf("keeping job %s one per tick: %w", s.key, err)
				}
			}
			done = true
			return nil
		})
		if errors.Is(err, errRollback) {
			continue
		}
		if err != nil {
			return moved, fmt.Errorf("moving job %s (row %d): %w", s.key, s.id, err)
		}
		if done {
			moved++
		}
	}
	return moved, nil
}

var errRollback = errors.New("rollback")
