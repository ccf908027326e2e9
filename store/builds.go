package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Build is one build of PostgreSQL: a commit with a set of build options.
type Build struct {
	// Key is the build cache key (commit and options), unique per build.
	Key    string
	Commit string
	// Options are the build options as the build package records them
	// (opaque JSON; empty means {}).
	Options json.RawMessage
	// Status is the build package's outcome, e.g. "ok" or "failed".
	Status   string
	LogPath  string
	Duration time.Duration
	// Error is the failure message or log tail of a failed build.
	Error string
	// Time is when the build finished; zero means now.
	Time time.Time
}

// RecordBuild stores b, replacing an earlier record of the same key (a
// rebuild after a failure, or the same key built on another machine).
func (s *Store) RecordBuild(ctx context.Context, b Build) error {
	if b.Key == "" || b.Commit == "" || b.Status == "" {
		return fmt.Errorf("recording build %q: key, commit and status are required", b.Key)
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO builds (key, commit, options, status, log_path, duration, error, built_at)
		VALUES ($1, $2, $3, $4, $5, make_interval(secs => $6), $7, $8)
		ON CONFLICT (key) DO UPDATE SET commit = EXCLUDED.commit, options = EXCLUDED.options,
			status = EXCLUDED.status, log_path = EXCLUDED.log_path, duration = EXCLUDED.duration,
			error = EXCLUDED.error, built_at = EXCLUDED.built_at`,
		b.Key, b.Commit, jsonOr(b.Options, "{}"), b.Status, b.LogPath, b.Duration.Seconds(), b.Error, timeOr(b.Time))
	if err != nil {
		return fmt.Errorf("recording build %s: %w", b.Key, err)
	}
	return nil
}

// Build returns the record of the build with key, or ErrNotFound.
func (s *Store) Build(ctx context.Context, key string) (Build, error) {
	var b Build
	var secs float64
	err := s.db.QueryRow(ctx, `
		SELECT key, commit, options, status, log_path, extract(epoch FROM duration)::float8, error, built_at
		FROM builds WHERE key = $1`, key).
		Scan(&b.Key, &b.Commit, &b.Options, &b.Status, &b.LogPath, &secs, &b.Error, &b.Time)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, fmt.Errorf("build %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return b, fmt.Errorf("reading build %s: %w", key, err)
	}
	b.Duration = time.Duration(secs * float64(time.Second))
	return b, nil
}
