package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SaveBisection stores the whole resumable state of bisection id (package
// bisect's JSON, opaque here) with its status, replacing what was saved
// before. Saving after every measured commit is what makes --resume lose
// at most one commit's work. Under a job's lease (WithLease) the save is
// fenced: it fails with ErrLeaseLost once another worker took the job.
func (s *Store) SaveBisection(ctx context.Context, id string, state json.RawMessage, status string) error {
	if id == "" || status == "" {
		return errors.New("saving bisection: id and status are required")
	}
	if !json.Valid(state) {
		return fmt.Errorf("saving bisection %s: state is not valid JSON", id)
	}
	err := s.fenced(ctx, func(q querier) error {
		_, err := q.Exec(ctx, `
		INSERT INTO bisections (id, status, state) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, state = EXCLUDED.state, updated_at = now()`,
			id, status, []byte(state))
		return err
	})
	if err != nil {
		return fmt.Errorf("saving bisection %s: %w", id, err)
	}
	return nil
}

// LoadBisection returns the state and status saved for id, or an error
// wrapping ErrNotFound.
func (s *Store) LoadBisection(ctx context.Context, id string) (json.RawMessage, string, error) {
	var state json.RawMessage
	var status string
	err := s.db.QueryRow(ctx, "SELECT state, status FROM bisections WHERE id = $1", id).Scan(&state, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", fmt.Errorf("bisection %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, "", fmt.Errorf("loading bisection %s: %w", id, err)
	}
	return state, status, nil
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
