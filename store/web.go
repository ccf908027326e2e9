package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The read queries of the dashboard (package internal/front/web): lists and
// counts over the other tables that no other reader needs.

// SeriesKey names one nightly series: a scenario, metric and point with at
// least one nightly sample of the night's own commit, on one machine class.
type SeriesKey struct {
	// Class is the machine class of its nightly runs; "" is the default.
	Class    string
	Scenario string
	Metric   string
	Point    string
	// Nights is how many nightly runs measured it; Last is when the latest
	// of them started.
	Nights int
	Last   time.Time
}

// SeriesKeys lists the nightly series on branch ("" for every branch),
// ordered by scenario, metric, point and machine class.
func (s *Store) SeriesKeys(ctx context.Context, branch string) ([]SeriesKey, error) {
	rows, err := s.db.Query(ctx, `
		SELECT s.scenario, s.metric, s.point, n.machine_class, count(DISTINCT n.id), max(n.started_at)
		FROM nightly_runs n JOIN samples s ON s.nightly_id = n.id AND s.commit = n.commit
		WHERE $1 = '' OR n.branch = $1
		GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`, branch)
	if err != nil {
		return nil, fmt.Errorf("listing the nightly series: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SeriesKey, error) {
		var k SeriesKey
		err := row.Scan(&k.Scenario, &k.Metric, &k.Point, &k.Class, &k.Nights, &k.Last)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing the nightly series: %w", err)
	}
	return out, nil
}

const nightlyColumns = "id, branch, commit, status, detail, started_at, finished_at"

func scanNightly(row pgx.Row) (NightlyRun, error) {
	var r NightlyRun
	var finished *time.Time
	err := row.Scan(&r.ID, &r.Branch, &r.Commit, &r.Status, &r.Detail, &r.Started, &finished)
	r.Finished = nullTime(finished)
	return r, err
}

// NightlyRun returns nightly run id, or an error wrapping ErrNotFound.
func (s *Store) NightlyRun(ctx context.Context, id int64) (NightlyRun, error) {
	r, err := scanNightly(s.db.QueryRow(ctx, "SELECT "+nightlyColumns+" FROM nightly_runs WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("nightly run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("reading nightly run %d: %w", id, err)
	}
	return r, nil
}

// NightlyRuns returns the latest limit nightly runs of every branch, newest
// first.
func (s *Store) NightlyRuns(ctx context.Context, limit int) ([]NightlyRun, error) {
	rows, err := s.db.Query(ctx, "SELECT "+nightlyColumns+" FROM nightly_runs ORDER BY started_at DESC, id DESC LIMIT $1", limit)
	if err != nil {
		return nil, fmt.Errorf("listing nightly runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (NightlyRun, error) { return scanNightly(row) })
	if err != nil {
		return nil, fmt.Errorf("listing nightly runs: %w", err)
	}
	return out, nil
}

// EnvironmentUse is one recorded environment (a machine with its
// settings) and how much was measured on it.
type EnvironmentUse struct {
	EnvironmentID int64
	// Info is the environment as package bench records it (opaque).
	Info    json.RawMessage
	Samples int64
	// Last is when its latest sample was taken; zero when it has none.
	Last time.Time
}

// EnvironmentsUsed lists the recorded environments, the most recently
// used first.
func (s *Store) EnvironmentsUsed(ctx context.Context) ([]EnvironmentUse, error) {
	rows, err := s.db.Query(ctx, `
		SELECT e.id, e.info, count(s.id), max(s.taken_at)
		FROM environments e LEFT JOIN samples s ON s.environment_id = e.id
		GROUP BY e.id ORDER BY max(s.taken_at) DESC NULLS LAST, e.id DESC`)
	if err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (EnvironmentUse, error) {
		var m EnvironmentUse
		var last *time.Time
		err := row.Scan(&m.EnvironmentID, &m.Info, &m.Samples, &last)
		m.Last = nullTime(last)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	return out, nil
}

// Counts are the totals a monitoring scrape reports.
type Counts struct {
	// Jobs counts the queue's jobs (River's river_job) by JobStatuses,
	// River's states mapped as JobStatus says; Builds counts builds by
	// status.
	Jobs    map[string]int64
	Builds  map[string]int64
	Samples int64
	// Findings counts every finding; Pending those not settled.
	Findings, Pending int64
	// LastNightly is when the latest nightly run that finished started;
	// zero when none has.
	LastNightly time.Time
}

// JobStatuses are the statuses Counts.Jobs reports, each present (zero
// when no job has it).
var JobStatuses = []string{"queued", "running", "done", "failed", "cancelled"}

// JobStatus maps a River job state to the status monitoring reports:
// queued (available, scheduled, retryable, pending: waiting to run, or to
// run again), running, done (completed), failed (discarded: out of
// attempts), cancelled. An unknown state (a newer River's) is its own
// name.
func JobStatus(riverState string) string {
	switch riverState {
	case "available", "scheduled", "retryable", "pending":
		return "queued"
	case "completed":
		return "done"
	case "discarded":
		return "failed"
	}
	return riverState
}

const jobsByState = "SELECT state::text, count(*) FROM river_job GROUP BY 1"

// Counts returns the totals, each table read once.
func (s *Store) Counts(ctx context.Context) (Counts, error) {
	c := Counts{Jobs: map[string]int64{}, Builds: map[string]int64{}}
	for _, st := range JobStatuses {
		c.Jobs[st] = 0
	}
	for _, q := range []struct {
		sql string
		m   map[string]int64
	}{
		{jobsByState, c.Jobs},
		{"SELECT status, count(*) FROM builds GROUP BY 1", c.Builds},
	} {
		rows, err := s.db.Query(ctx, q.sql)
		if err != nil {
			return c, fmt.Errorf("counting: %w", err)
		}
		for rows.Next() {
			var k string
			var n int64
			if err := rows.Scan(&k, &n); err != nil {
				rows.Close()
				return c, fmt.Errorf("counting: %w", err)
			}
			if q.sql == jobsByState {
				k = JobStatus(k)
			}
			q.m[k] += n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return c, fmt.Errorf("counting: %w", err)
		}
	}
	var last *time.Time
	err := s.db.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM samples), (SELECT count(*) FROM findings),
			(SELECT count(*) FROM findings WHERE settled_at IS NULL),
			(SELECT max(started_at) FROM nightly_runs WHERE finished_at IS NOT NULL)`).
		Scan(&c.Samples, &c.Findings, &c.Pending, &last)
	if err != nil {
		return c, fmt.Errorf("counting: %w", err)
	}
	c.LastNightly = nullTime(last)
	return c, nil
}
