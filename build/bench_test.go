package build

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
)

// Run with: go test -run '^$' -bench . -benchtime 1x ./build/
// (each iteration is a real PostgreSQL build; BenchmarkFullBuild takes
// minutes).

// BenchmarkFullBuild builds the fixture's base commit from nothing: a new
// state directory, so an empty worktree and an empty ccache.
func BenchmarkFullBuild(b *testing.B) {
	f := benchFixture(b)
	for i := 0; i < b.N; i++ {
		state, err := os.MkdirTemp("/var/tmp", "pgbisect-bench-")
		if err != nil {
			b.Fatal(err)
		}
		os.Chmod(state, 0o755)
		builder := NewBuilder(f.repo, state, Options{}, nil, nil)
		setBuildAs(b, builder)
		start := time.Now()
		if _, err := builder.Build(context.Background(), f.base); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/full-build")
		os.RemoveAll(state)
	}
}

// BenchmarkIncrementalBuild changes one backend .c file and builds: checkout
// of one file, make, install into the cache.
func BenchmarkIncrementalBuild(b *testing.B) {
	f := benchFixture(b)
	if _, err := f.b.Build(context.Background(), f.base); err != nil {
		b.Fatal(err)
	}
	stamp := time.Now().UnixNano() // new commits, never cached
	var total time.Duration
	for i := 0; i < b.N; i++ {
		c, err := pgsrc.Commit(f.dir, fmt.Sprintf("bench %d", i), pgsrc.BaseDate.Add(time.Duration(i+1)*time.Hour),
			map[string]func(string) (string, error){
				"src/backend/commands/copyfrom.c": appendLine(fmt.Sprintf("/* bench %d %d */", stamp, i)),
			})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := f.b.Build(context.Background(), c); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/incremental-build")
}

// BenchmarkCacheHit asks for a build that is in the cache.
func BenchmarkCacheHit(b *testing.B) {
	f := benchFixture(b)
	if _, err := f.b.Build(context.Background(), f.base); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A new builder each time: no in-memory key memo helps.
		nb := NewBuilder(f.repo, f.state, Options{}, nil, nil)
		setBuildAs(b, nb)
		if _, err := nb.Build(context.Background(), f.base); err != nil {
			b.Fatal(err)
		}
	}
}

type benchFix struct {
	dir, base, state string
	repo             *Repo
	b                *Builder
}

func benchFixture(b *testing.B) *benchFix {
	b.Helper()
	pgsrctest.Require(b)
	state, err := pgsrctest.StateDir()
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "pg.git")
	base, err := pgsrc.NewRepo(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	repo, err := Open(context.Background(), dir, state, nil)
	if err != nil {
		b.Fatal(err)
	}
	bb := NewBuilder(repo, state, Options{}, nil, nil)
	setBuildAs(b, bb)
	return &benchFix{dir: dir, base: base, state: state, repo: repo, b: bb}
}
