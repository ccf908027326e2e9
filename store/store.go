// Package store keeps everything pgbisect measures and decides in a
// PostgreSQL database: builds, samples and their environments, comparisons,
// bisection state, findings and where they were posted, the on-demand job
// queue, the nightly runs, and jobs' progress as sequenced events that
// another process can follow (events.go).
//
// The design choice that matters: the results live in PostgreSQL even on a
// single machine. With no database configured, pgbisect runs a private
// cluster under its state directory (see Cluster) with the server binaries
// installed on the machine, so the results are queryable with psql from day
// one and moving to a shared store is only a --db URL away. The schema comes
// from numbered SQL files embedded in the binary and applied at Open.
//
// Payloads whose types belong to other packages (bisection state, reports,
// environments, build options) are stored as JSON, so those packages evolve
// without migrations. The store implements the engine's state saver
// (bisect.Saver: SaveBisection, LoadBisection) and the outbox of findings
// (notify.Outbox: Add, Pending, MarkPosted) on the model types of bisect and
// bisect/finding directly; it imports neither notify nor bench.
package store

import (
	"context"
	"errors"
	"fmt"
	redactpkg "github.com/pgbisect/pgbisect/internal/base/redact"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config says which database to open.
type Config struct {
	// URL is a PostgreSQL connection URL (config db, --db, PGBISECT_DB).
	// Empty means the private cluster under StateDir.
	URL string
	// StateDir is pgbisect's state directory; the private cluster lives in
	// StateDir/db. Used only when URL is empty.
	StateDir string
	// RunAs is the user that runs the private cluster when pgbisect is
	// root. Default: postgres.
	RunAs string
	// StopOnClose stops the private cluster in Close. Default: false, the
	// cluster is left running for the next pgbisect invocation (tests set
	// it so they leave no server behind).
	StopOnClose bool
	// Log gets progress and warnings; nil discards them.
	Log *slog.Logger
}

// Store is an open results database. Its methods are safe for concurrent use.
type Store struct {
	db      querier
	pool    *pgxpool.Pool // nil for a Store bound to a transaction (tests)
	cluster *Cluster      // nil when Config.URL was given
	stop    bool
	log     *slog.Logger
	// followPoll is how often FollowEvents re-reads without a notification;
	// zero means defaultFollowPoll (tests set it).
	followPoll time.Duration
}

// querier is what the store needs from a pool or a transaction. The methods
// take it rather than a pool so tests can run each one inside a transaction
// that is rolled back (Begin on a pgx.Tx makes a savepoint).
type querier interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Open connects to the results database, starting the private cluster first
// when cfg.URL is empty, and applies pending migrations. A database whose
// schema is newer than this binary gives an error wrapping ErrSchemaTooNew.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{log: log, stop: cfg.StopOnClose}
	var pcfg *pgxpool.Config
	if cfg.URL == "" {
		c, err := NewCluster(cfg.StateDir, cfg.RunAs, log)
		if err != nil {
			return nil, err
		}
		if err := c.Start(ctx); err != nil {
			return nil, err
		}
		s.cluster = c
		// Configured from the cluster alone: libpq's variables in the
		// environment change nothing (a URL given keeps their meaning).
		if pcfg, err = c.pg().PoolConfig(clusterDB); err != nil {
			return nil, err
		}
	} else {
		var err error
		if pcfg, err = pgxpool.ParseConfig(cfg.URL); err != nil {
			return nil, fmt.Errorf("results database URL: %s (expected postgres://user@host/dbname or postgresql:///dbname?host=/socket/dir)", redactpkg.String(err.Error()))
		}
	}
	if c := s.cluster; c != nil {
		// The private cluster may be stopped ("pgbisect db stop") or crash
		// under a long-running daemon: check connections before use (a ping
		// on a unix socket costs ~0.1 ms) and start the cluster again
		// before making a new one.
		pcfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return true }
		pcfg.BeforeConnect = func(ctx context.Context, _ *pgx.ConnConfig) error { return c.ensureRunning(ctx) }
	} else {
		// A shared server restarted under a running bisection: check a
		// connection idle for more than a moment (pgx's default waits a
		// second), so the first query after the restart does not fail on
		// a connection that died with the old server.
		pcfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
			return p.IdleDuration > 100*time.Millisecond
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("opening the results database: %w", err)
	}
	s.pool, s.db = pool, pool
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("connecting to the results database %s: %w", redact(pcfg.ConnConfig), err)
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Migrate applies the migrations this binary has and the database lacks.
// Open calls it; it is exported for "pgbisect db migrate".
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := readMigrations(migrationFS, "migrations")
	if err != nil {
		return err
	}
	if _, err = migrate(ctx, s.db, ms, s.log); err != nil {
		return err
	}
	if s.pool == nil {
		return nil // bound to a test's transaction: no job tables
	}
	return migrateRiver(ctx, s.pool, s.log)
}

// Cluster is the private cluster the store runs on, or nil when it was
// opened with a URL.
func (s *Store) Cluster() *Cluster { return s.cluster }

// Close closes the connections; with Config.StopOnClose it also stops the
// private cluster.
func (s *Store) Close() {
	if s.pool != nil {
		s.pool.Close()
	}
	if s.stop && s.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := s.cluster.Stop(ctx); err != nil {
			s.log.Warn("stopping the results cluster", slog.Any("err", err))
		}
	}
}

// redact names a database without its password, for errors.
func redact(c *pgx.ConnConfig) string {
	return fmt.Sprintf("%q (host %s, user %s)", c.Database, c.Host, c.User)
}

// inTx runs fn in a transaction (a savepoint when s is bound to one).
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// ErrNotFound is returned by lookups of one row (LoadBisection, Build,
// LastNightly) when there is no such row.
var ErrNotFound = errors.New("not found")

// jsonOr returns data, or def when data is empty, for NOT NULL jsonb columns.
func jsonOr(data []byte, def string) []byte {
	if len(data) == 0 {
		return []byte(def)
	}
	return data
}

// timeOr returns t, or now when t is zero.
func timeOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// nullTime turns a nullable timestamp into a zero-or-set time.Time.
func nullTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
