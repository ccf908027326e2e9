package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The dashboard's paged lists (its JSON API) and its view of the work
// under way wherever it runs.

// BisectionSummary is a stored bisection as a list shows it: its row and
// the inputs its saved state names.
type BisectionSummary struct {
	BisectionInfo
	Good, Bad        string
	Scenario, Metric string
	Point            string
	Outcome          string
}

// BisectionsPage lists up to limit bisections, newest first (by when they
// were made, then ID), after bisection after ("": from the newest). An
// after that names no bisection is an error wrapping ErrNotFound.
func (s *Store) BisectionsPage(ctx context.Context, limit int, after string) ([]BisectionSummary, error) {
	if err := s.exists(ctx, "bisections", after); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `
		SELECT id, status, created_at, updated_at, coalesce(state->'inputs'->>'good', ''), coalesce(state->'inputs'->>'bad', ''),
			coalesce(state->'inputs'->>'scenario', ''), coalesce(state->'inputs'->>'metric', ''),
			coalesce(state->'inputs'->>'point', ''), coalesce(state->>'outcome', '')
		FROM bisections
		WHERE $1 = '' OR (created_at, id) < (SELECT created_at, id FROM bisections WHERE id = $1)
		ORDER BY created_at DESC, id DESC LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing bisections: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (BisectionSummary, error) {
		var b BisectionSummary
		err := row.Scan(&b.ID, &b.Status, &b.Created, &b.Updated, &b.Good, &b.Bad, &b.Scenario, &b.Metric, &b.Point, &b.Outcome)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing bisections: %w", err)
	}
	return out, nil
}

// FindingsPage lists up to limit findings with their posts, newest first
// (by when they were made, then ID), after finding after ("": from the
// newest). Their Report is left out. An after that names no finding is an
// error wrapping ErrNotFound.
func (s *Store) FindingsPage(ctx context.Context, limit int, after string) ([]Finding, error) {
	if err := s.exists(ctx, "findings", after); err != nil {
		return nil, err
	}
	return s.findings(ctx, `
		SELECT id, kind, branch, coalesce(bisection_id, ''), culprits, scenario, point, metric,
			ratio, ratio_low, ratio_high, p, n, 'null'::jsonb, created_at, settled_at IS NOT NULL
		FROM findings
		WHERE $1 = '' OR (created_at, id) < (SELECT created_at, id FROM findings WHERE id = $1)
		ORDER BY created_at DESC, id DESC LIMIT $2`, after, limit)
}

// exists checks that table (bisections or findings) has a row id; "" is
// no row asked for.
func (s *Store) exists(ctx context.Context, table, id string) error {
	if id == "" {
		return nil
	}
	var ok bool
	if err := s.db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+pgx.Identifier{table}.Sanitize()+" WHERE id = $1)", id).Scan(&ok); err != nil {
		return fmt.Errorf("looking for %s %s: %w", table, id, err)
	}
	if !ok {
		return fmt.Errorf("%s has no %q: %w", table, id, ErrNotFound)
	}
	return nil
}

// Stream is an event stream's latest event: what a job, a bisection run
// from the command line or any other producer last reported.
type Stream struct {
	// JobID names the stream (a queue job's "job-KEY", a bisection's ID).
	JobID string
	Last  Event
	// BisectionStatus is the phase of the bisection of the same ID, ""
	// when the stream is not a bisection's.
	BisectionStatus string
}

// ActiveStreams returns the streams whose last event is younger than
// within and is not of one of the kinds in ended (the producer's "it is
// over"), newest first: the work under way on any machine sharing the
// store, whoever started it. A producer killed without a last word stays
// in the list until within has passed.
func (s *Store) ActiveStreams(ctx context.Context, within time.Duration, ended ...string) ([]Stream, error) {
	if ended == nil {
		ended = []string{}
	}
	rows, err := s.db.Query(ctx, `
		SELECT e.job_id, e.seq, e.at, e.kind, e.payload, coalesce(b.status, '')
		FROM job_event_seqs c
		JOIN job_events e ON e.job_id = c.job_id AND e.seq = c.last_seq
		LEFT JOIN bisections b ON b.id = c.job_id
		WHERE e.at > now() - $1 * interval '1 microsecond' AND NOT e.kind = ANY($2)
		ORDER BY e.at DESC, e.job_id`, within.Microseconds(), ended)
	if err != nil {
		return nil, fmt.Errorf("listing the work under way: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Stream, error) {
		var st Stream
		var payload []byte
		err := row.Scan(&st.JobID, &st.Last.Seq, &st.Last.At, &st.Last.Kind, &payload, &st.BisectionStatus)
		st.Last.JobID, st.Last.Payload = st.JobID, json.RawMessage(payload)
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing the work under way: %w", err)
	}
	return out, nil
}
