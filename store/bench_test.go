package store

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkAddSamples stores batches of 100 samples (one workload run of a
// scenario with a few metrics, times a matrix), inside a rolled-back
// transaction.
func BenchmarkAddSamples(b *testing.B) {
	if noServer != nil {
		b.Skip(noServer)
	}
	ctx := context.Background()
	tx, err := shared.pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	s := &Store{db: tx}
	batch := make([]Sample, 100)
	for i := range batch {
		batch[i] = Sample{BuildKey: "k", Commit: "c", Scenario: "copy", Point: fmt.Sprintf("clients=%d", i%4), Metric: "tps", Value: float64(i), Index: i}
	}
	b.ResetTimer()
	for b.Loop() {
		if err := s.AddSamples(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkClaimFinish claims and finishes one job per iteration.
func BenchmarkClaimFinish(b *testing.B) {
	if noServer != nil {
		b.Skip(noServer)
	}
	ctx := context.Background()
	tx, err := shared.pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	s := &Store{db: tx}
	for i := 0; i < b.N; i++ {
		if _, err := s.Enqueue(ctx, "bisect", nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j, err := s.Claim(ctx, "w")
		if err != nil || j == nil {
			b.Fatal(j, err)
		}
		if err := s.Finish(ctx, j.ID, nil); err != nil {
			b.Fatal(err)
		}
	}
}
