package bench

import (
	"context"
	"testing"
)

// BenchmarkSampleOverhead measures what a sample costs beyond its
// workload: a restart-lifecycle sample of "SELECT 1" (server start, a
// session, the environment and settings read, server stop).
func BenchmarkSampleOverhead(b *testing.B) {
	bin := pgBin(b)
	r, _ := newTestRunner(b)
	sc, err := Load([]byte("lifecycle: restart\nworkload:\n  - sql: SELECT 1\nmetrics:\n  - {name: e, step: sql, value: elapsed}\n"), "b.yaml", nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	defer r.Close(ctx)
	target := Target{Name: "pg15", BinDir: bin}
	if _, err := r.Run(ctx, sc, target, Point{}); err != nil { // initdb and setup, not timed
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Run(ctx, sc, target, Point{}); err != nil {
			b.Fatal(err)
		}
	}
}
