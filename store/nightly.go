package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// NightlyRun is one nightly pass over a branch.
type NightlyRun struct {
	ID     int64
	Branch string
	// Commit is the full hash of the branch head the pass measured.
	Commit string
	// Status is the nightly package's outcome, e.g. "running", "unchanged",
	// "ok", "regression", "build-failed", "failed".
	Status string
	// Detail is whatever the nightly pass wants to keep (opaque).
	Detail   json.RawMessage
	Started  time.Time // zero means now
	Finished time.Time // zero while running
}

// RecordNightly inserts r when r.ID is 0 (setting r.ID), for the machine
// class of ctx's job (ClassOf), and otherwise updates its status, detail
// and finish time.
func (s *Store) RecordNightly(ctx context.Context, r *NightlyRun) error {
	if r.Branch == "" || r.Commit == "" || r.Status == "" {
		return errors.New("recording nightly run: branch, commit and status are required")
	}
	var finished *time.Time
	if !r.Finished.IsZero() {
		finished = &r.Finished
	}
	if r.ID == 0 {
		r.Started = timeOr(r.Started)
		err := s.db.QueryRow(ctx, `
			INSERT INTO nightly_runs (branch, commit, status, detail, started_at, finished_at, machine_class)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
			r.Branch, r.Commit, r.Status, jsonOr(r.Detail, "{}"), r.Started, finished, ClassOf(ctx)).Scan(&r.ID)
		if err != nil {
			return fmt.Errorf("recording nightly run of %s: %w", r.Branch, err)
		}
		return nil
	}
	tag, err := s.db.Exec(ctx, `UPDATE nightly_runs SET commit = $2, status = $3, detail = $4, finished_at = $5 WHERE id = $1`,
		r.ID, r.Commit, r.Status, jsonOr(r.Detail, "{}"), finished)
	if err != nil {
		return fmt.Errorf("updating nightly run %d: %w", r.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("updating nightly run %d: %w", r.ID, ErrNotFound)
	}
	return nil
}

// LastNightly returns the latest nightly run of branch, only considering
// runs with one of statuses when any are given (LastNightly(ctx, "master",
// "ok") is the last good night). It returns an error wrapping ErrNotFound
// when there is none. Only runs of the machine class of ctx's job are
// considered (ClassOf).
func (s *Store) LastNightly(ctx context.Context, branch string, statuses ...string) (NightlyRun, error) {
	var r NightlyRun
	var finished *time.Time
	err := s.db.QueryRow(ctx, `
		SELECT id, branch, commit, status, detail, started_at, finished_at FROM nightly_runs
		WHERE branch = $1 AND (coalesce(cardinality($2::text[]), 0) = 0 OR status = ANY($2)) AND machine_class = $3
		ORDER BY started_at DESC, id DESC LIMIT 1`, branch, statuses, ClassOf(ctx)).
		Scan(&r.ID, &r.Branch, &r.Commit, &r.Status, &r.Detail, &r.Started, &finished)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("nightly run of %s: %w", branch, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("reading the last nightly run of %s: %w", branch, err)
	}
	r.Finished = nullTime(finished)
	return r, nil
}
