package store

import (
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

func TestReadMigrations(t *testing.T) {
	ms, err := readMigrations(migrationFS, "migrations")
	if err != nil {
		t.Fatalf("embedded migrations: %v", err)
	}
	if len(ms) == 0 || SchemaVersion() != len(ms) {
		t.Fatalf("SchemaVersion() = %d with %d migrations", SchemaVersion(), len(ms))
	}
	_, err = readMigrations(os.DirFS("testdata"), "migrations-gap")
	if err == nil || !strings.Contains(err.Error(), "003_c.sql: expected version 2") {
		t.Fatalf("a gap in versions: got %v, want an error naming 003_c.sql", err)
	}
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestMigrateAppliesOnlyPending applies version 1 of a two-step fixture,
// then both: the second run applies only version 2, a third applies nothing.
func TestMigrateAppliesOnlyPending(t *testing.T) {
	ctx := context.Background()
	pool := openPool(t, testSchema(t))
	ms, err := readMigrations(os.DirFS("testdata"), "migrations-two")
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		ms   []migration
		want []int
	}{
		{ms[:1], []int{1}},
		{ms, []int{2}},
		{ms, nil},
	} {
		got, err := migrate(ctx, pool, step.ms, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, step.want) {
			t.Fatalf("applied %v, want %v", got, step.want)
		}
	}
	if _, err := pool.Exec(ctx, "INSERT INTO widgets (id, name) VALUES (1, 'x')"); err != nil {
		t.Fatalf("migration 2 not in effect: %v", err)
	}
}

// TestMigrateFailureAppliesNothing: a failing migration rolls back the
// ones before it in the same run.
func TestMigrateFailureAppliesNothing(t *testing.T) {
	ctx := context.Background()
	pool := openPool(t, testSchema(t))
	ms := []migration{
		{Version: 1, Name: "001_ok.sql", SQL: "CREATE TABLE ok (id int)"},
		{Version: 2, Name: "002_bad.sql", SQL: "CREATE TABLE bad (id nosuchtype)"},
	}
	if _, err := migrate(ctx, pool, ms, nil); err == nil || !strings.Contains(err.Error(), "002_bad.sql") {
		t.Fatalf("got %v, want an error naming 002_bad.sql", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename IN ('ok', 'pgbisect_migrations') AND schemaname = current_schema()").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d tables left behind by a failed migration run", n)
	}
}

// TestOpenURL is the --db path: a fresh schema is migrated to the newest
// version, opening again is a no-op, and no private cluster is involved.
func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	url := testSchema(t)
	for i := range 2 {
		s, err := Open(ctx, Config{URL: url, Log: testLog()})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if s.Cluster() != nil {
			t.Fatal("a store opened by URL has a private cluster")
		}
		var versions []int32
		rows, _ := s.pool.Query(ctx, "SELECT version FROM pgbisect_migrations ORDER BY version")
		for rows.Next() {
			var v int32
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			versions = append(versions, v)
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		if len(versions) != SchemaVersion() || int(versions[len(versions)-1]) != SchemaVersion() {
			t.Fatalf("open %d: versions %v, want 1..%d once each", i, versions, SchemaVersion())
		}
		if err := s.RecordBuild(ctx, Build{Key: "k", Commit: "c", Status: "ok"}); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

func TestOpenSchemaTooNew(t *testing.T) {
	ctx := context.Background()
	url := testSchema(t)
	s, err := Open(ctx, Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.pool.Exec(ctx, "INSERT INTO pgbisect_migrations (version, name) VALUES ($1, 'from_the_future.sql')", SchemaVersion()+1)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, Config{URL: url})
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("got %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), "upgrade pgbisect") {
		t.Errorf("error %q does not say what to do", err)
	}
}

// TestOpenConcurrent: several processes opening a new database at once
// apply each migration exactly once (the advisory lock serialises them).
func TestOpenConcurrent(t *testing.T) {
	ctx := context.Background()
	url := testSchema(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(ctx, Config{URL: url})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := openPool(t, url).QueryRow(ctx, "SELECT count(*) FROM pgbisect_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != SchemaVersion() {
		t.Fatalf("%d migration rows, want %d", n, SchemaVersion())
	}
	// River's tables came with them, once, under the same lock.
	m, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	var river int
	if err := openPool(t, url).QueryRow(ctx, "SELECT count(*) FROM river_migration").Scan(&river); err != nil {
		t.Fatalf("River's tables were not created: %v", err)
	}
	if want := len(m.AllVersions()); river != want {
		t.Fatalf("%d River migration rows, want %d", river, want)
	}
	if _, err := openPool(t, url).Exec(ctx, "SELECT id, kind, args, state FROM river_job LIMIT 1"); err != nil {
		t.Fatalf("river_job: %v", err)
	}
}
