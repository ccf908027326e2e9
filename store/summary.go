package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Summary is what "pgbisect db status" shows about a results database.
type Summary struct {
	// Version is the database's schema version (0: never migrated);
	// SchemaVersion() is this binary's.
	Version int
	// Rows counts the rows of the main tables, by table name.
	Rows map[string]int64
	// PendingFindings are findings not posted everywhere yet; QueuedJobs
	// and RunningJobs are the queue.
	PendingFindings, QueuedJobs, RunningJobs int64
}

// summaryTables are counted by Summarize, in display order.
var summaryTables = []string{"builds", "samples", "comparisons", "bisections", "findings", "posts", "nightly_runs", "machines", "river_job"}

// SummaryTables lists the tables Summary.Rows counts, in display order.
func SummaryTables() []string { return append([]string(nil), summaryTables...) }

// Summarize connects to url without migrating it and reports its schema
// version and contents.
func Summarize(ctx context.Context, url string) (Summary, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return Summary{}, fmt.Errorf("connecting to the results database: %w", err)
	}
	return summarize(ctx, cfg)
}

// Summarize reports the private cluster's schema version and contents,
// as the package-level Summarize does for a URL.
func (c *Cluster) Summarize(ctx context.Context) (Summary, error) {
	cfg, err := c.pg().ConnConfig(clusterDB)
	if err != nil {
		return Summary{}, err
	}
	return summarize(ctx, cfg)
}

func summarize(ctx context.Context, cfg *pgx.ConnConfig) (Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return Summary{}, fmt.Errorf("connecting to the results database: %w", err)
	}
	defer conn.Close(ctx)
	var s Summary
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('pgbisect_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return s, fmt.Errorf("reading the schema version: %w", err)
	}
	if !exists {
		return s, nil
	}
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM pgbisect_migrations").Scan(&s.Version); err != nil {
		return s, fmt.Errorf("reading the schema version: %w", err)
	}
	if s.Version == 0 || s.Version > SchemaVersion() {
		return s, nil
	}
	s.Rows = map[string]int64{}
	for _, t := range summaryTables {
		var n int64
		var present bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", t).Scan(&present); err != nil || !present {
			continue // a database an older pgbisect made, not migrated yet
		}
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{t}.Sanitize()).Scan(&n); err != nil {
			return s, fmt.Errorf("counting %s: %w", t, err)
		}
		s.Rows[t] = n
	}
	if _, ok := s.Rows["river_job"]; !ok {
		err = conn.QueryRow(ctx, "SELECT count(*) FROM findings WHERE settled_at IS NULL").Scan(&s.PendingFindings)
		if err != nil {
			return s, fmt.Errorf("summarising the results database: %w", err)
		}
		return s, nil
	}
	err = conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM findings WHERE settled_at IS NULL),
		(SELECT count(*) FROM river_job WHERE state IN ('available', 'scheduled', 'retryable', 'pending')),
		(SELECT count(*) FROM river_job WHERE state = 'running')`).Scan(&s.PendingFindings, &s.QueuedJobs, &s.RunningJobs)
	if err != nil {
		return s, fmt.Errorf("summarising the results database: %w", err)
	}
	return s, nil
}
