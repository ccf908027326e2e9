package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgbisect/pgbisect/bisect"
)

// SaveBisection stores the whole resumable state of bisection b with its
// phase as the row's status ("endpoints", "search", "check", "done"),
// replacing what was saved before, in one statement: a crash leaves the
// previous state or the new one. It implements bisect.Saver; the engine
// saves after every build and sample, so --resume loses at most one
// sample's work, on any machine sharing the store. Under a job's lease
// (WithLease) the save is fenced: it fails with ErrLeaseLost once another
// worker took the job.
func (s *Store) SaveBisection(ctx context.Context, b *bisect.State) error {
	if b.ID == "" || b.Phase == "" {
		return errors.New("saving bisection: id and phase are required")
	}
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encoding bisection %s: %w", b.ID, err)
	}
	err = s.fenced(ctx, func(q querier) error {
		_, err := q.Exec(ctx, `
		INSERT INTO bisections (id, status, state) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, state = EXCLUDED.state, updated_at = now()`,
			b.ID, string(b.Phase), data)
		return err
	})
	if err != nil {
		return fmt.Errorf("saving bisection %s: %w", b.ID, err)
	}
	return nil
}

var (
	_ bisect.Saver      = (*Store)(nil)
	_ bisect.Superseder = (*Store)(nil)
)

// SupersedeSamples marks the samples of bisection b that no comparison
// uses (bisect.State.Superseded): those its moves to another machine
// superseded, and those stored at or after its clock, by a process that
// stopped before it saved the state. They are kept. Samples stored without
// the bisection's clock (before migration 007) are left as they are. It
// implements bisect.Superseder; under a job's lease it is fenced.
func (s *Store) SupersedeSamples(ctx context.Context, b *bisect.State) error {
	var starts, ats []int32
	for _, mv := range b.Moves {
		if mv.Start < mv.At {
			starts, ats = append(starts, int32(mv.Start)), append(ats, int32(mv.At))
		}
		for _, q := range mv.Seqs {
			starts, ats = append(starts, int32(q)), append(ats, int32(q+1))
		}
	}
	err := s.fenced(ctx, func(q querier) error {
		_, err := q.Exec(ctx, `
		UPDATE samples SET superseded = true
		WHERE bisection_id = $1 AND NOT superseded AND (bisection_seq >= $2
			OR EXISTS (SELECT 1 FROM unnest($3::int4[], $4::int4[]) AS r(a, b) WHERE bisection_seq >= r.a AND bisection_seq < r.b))`,
			b.ID, b.SamplesTaken, starts, ats)
		return err
	})
	if err != nil {
		return fmt.Errorf("marking superseded samples of bisection %s: %w", b.ID, err)
	}
	return nil
}

// LoadBisection returns the saved state of bisection id, or an error
// wrapping bisect.ErrNotFound.
func (s *Store) LoadBisection(ctx context.Context, id string) (*bisect.State, error) {
	var data []byte
	err := s.db.QueryRow(ctx, "SELECT state FROM bisections WHERE id = $1", id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s (looked in the results store; 'pgbisect status' lists them)", bisect.ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("loading bisection %s: %w", id, err)
	}
	st, err := bisect.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("bisection %s in the results store: %w", id, err)
	}
	return st, nil
}

// BisectionInfo summarises a stored bisection.
type BisectionInfo struct {
	ID      string
	Status  string
	Created time.Time
	Updated time.Time
}

// Bisections lists stored bisections, most recently updated first, keeping
// only those with one of statuses when any are given.
func (s *Store) Bisections(ctx context.Context, statuses ...string) ([]BisectionInfo, error) {
	rows, err := s.db.Query(ctx, `
		SELECT id, status, created_at, updated_at FROM bisections
		WHERE coalesce(cardinality($1::text[]), 0) = 0 OR status = ANY($1)
		ORDER BY updated_at DESC, id`, statuses)
	if err != nil {
		return nil, fmt.Errorf("listing bisections: %w", err)
	}
	defer rows.Close()
	var out []BisectionInfo
	for rows.Next() {
		var b BisectionInfo
		if err := rows.Scan(&b.ID, &b.Status, &b.Created, &b.Updated); err != nil {
			return nil, fmt.Errorf("listing bisections: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
