package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// ErrSchemaTooNew is returned by Open and Migrate when the database was
// migrated by a newer pgbisect than this one.
var ErrSchemaTooNew = errors.New("results database schema is newer than this pgbisect")

// migrationLock is the pg_advisory_xact_lock key that serialises migrations
// of one database, so two pgbisect processes starting together do not both
// apply version 1. It is the first 8 bytes of "pgbisect" read as an integer.
const migrationLock int64 = 0x7067626973656374

// migration is one numbered SQL file from migrations/.
type migration struct {
	Version int
	Name    string
	SQL     string
}

// readMigrations loads NNN_name.sql files from dir in fsys, in version order.
// Versions must start at 1 and have no gaps, so a missing file is caught
// when the binary is built and tested, not in a user's database.
func readMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNN_description.sql", e.Name())
		}
		data, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{Version: v, Name: e.Name(), SQL: string(data)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d (versions start at 1 with no gaps or duplicates)", m.Name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the newest migration this binary knows.
func SchemaVersion() int {
	ms, err := readMigrations(migrationFS, "migrations")
	if err != nil {
		panic(err) // the embedded files are checked by the tests
	}
	return len(ms)
}

// migrate brings the schema of db up to the newest of ms. It runs in one
// transaction holding an advisory lock: either every pending migration is
// applied or none is, and a concurrent migrate waits and then finds nothing
// to do. It returns the versions it applied.
func migrate(ctx context.Context, db querier, ms []migration, log *slog.Logger) ([]int, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrating results database: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return nil, fmt.Errorf("migrating results database: taking the migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS pgbisect_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("migrating results database: %w", err)
	}
	var current int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM pgbisect_migrations").Scan(&current); err != nil {
		return nil, fmt.Errorf("reading the results schema version: %w", err)
	}
	known := len(ms)
	if current > known {
		return nil, fmt.Errorf("%w: the database is at version %d, this binary knows versions up to %d: upgrade pgbisect (or point --db at another database)",
			ErrSchemaTooNew, current, known)
	}
	var applied []int
	for _, m := range ms[current:] {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("applying migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO pgbisect_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			return nil, fmt.Errorf("recording migration %s: %w", m.Name, err)
		}
		applied = append(applied, m.Version)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("committing migrations: %w", err)
	}
	if len(applied) > 0 && log != nil {
		log.Info("migrated results database", slog.Int("from", current), slog.Int("to", known))
	}
	return applied, nil
}

// migrateRiver brings River's job tables (river_job, river_leader, ...) up
// to the version this binary's River needs. rivermigrate takes no lock of
// its own and applies each version in a transaction of its own (some add
// enum values, which cannot be used in the transaction that adds them), so
// it runs holding pgbisect's migration lock as a session lock on one
// connection: a second pgbisect starting at the same moment waits, then
// finds nothing to do.
func migrateRiver(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrating the job tables: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return fmt.Errorf("migrating the job tables: taking the migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock) //nolint:errcheck // the session ends with the connection anyway
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("migrating the job tables: %w", err)
	}
	res, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("migrating the job tables (River): %w", err)
	}
	if len(res.Versions) > 0 && log != nil {
		vs := make([]int, len(res.Versions))
		for i, v := range res.Versions {
			vs[i] = v.Version
		}
		log.Info("migrated the job tables (River)", slog.Any("versions", vs))
	}
	return nil
}
