package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAddSamples stores batches of 100 samples (one workload run of a
// scenario with a few metrics, times a matrix), inside a rolled-back
// transaction.
func BenchmarkAddSamples(b *testing.B) {
	needServer(b)
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

// BenchmarkAppendEvent appends committed events to one job (each its own
// transaction, as a running job does), then deletes them.
func BenchmarkAppendEvent(b *testing.B) {
	needServer(b)
	ctx := context.Background()
	job := fmt.Sprintf("bench-append-%d", b.N)
	b.Cleanup(func() { deleteEvents(b, job) })
	payload := json.RawMessage(`{"commit": "0123456789", "metric": "tps", "value": 1234.5}`)
	for b.Loop() {
		if _, err := shared.AppendEvent(ctx, job, "sample", payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFollowLatency measures one event from AppendEvent on one pool to
// a follower's callback on another connection, woken by NOTIFY.
func BenchmarkFollowLatency(b *testing.B) {
	needServer(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job := fmt.Sprintf("bench-follow-%d", b.N)
	b.Cleanup(func() { deleteEvents(b, job) })
	follower := &Store{db: shared.pool, pool: shared.pool, followPoll: time.Hour}
	ch := make(chan int64)
	go follower.FollowEvents(ctx, job, 0, func(e Event) error { ch <- e.Seq; return nil }) //nolint:errcheck
	for b.Loop() {
		seq, err := shared.AppendEvent(ctx, job, "sample", nil)
		if err != nil {
			b.Fatal(err)
		}
		if got := <-ch; got != seq {
			b.Fatalf("followed seq %d, want %d", got, seq)
		}
	}
}

func deleteEvents(b *testing.B, job string) {
	ctx := context.Background()
	if _, err := shared.pool.Exec(ctx, "DELETE FROM job_events WHERE job_id = $1", job); err != nil {
		b.Error(err)
	}
	if _, err := shared.pool.Exec(ctx, "DELETE FROM job_event_seqs WHERE job_id = $1", job); err != nil {
		b.Error(err)
	}
}

// BenchmarkSampleRowBytes measures the disk a nightly sample takes, table
// and indexes together, with realistic values (a 40-character commit, a
// build key, a matrix point, a machine and class), for docs/scale.md's
// sizes: go test -run '^$' -bench SampleRowBytes ./store/
func BenchmarkSampleRowBytes(b *testing.B) {
	needServer(b)
	ctx := context.Background()
	tx, err := shared.pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "CREATE TEMP TABLE size_samples (LIKE samples INCLUDING ALL)"); err != nil {
		b.Fatal(err)
	}
	const rows = 100000
	for b.Loop() {
		if _, err := tx.Exec(ctx, "TRUNCATE size_samples"); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO size_samples (build_key, commit, scenario, point, metric, value, sample_index, taken_at,
				environment_id, nightly_id, machine, machine_class)
			SELECT md5((i / 40)::text || 'b') || '-O2', md5((i / 40)::text) || '01234567', 'copy-concurrent', 'clients=' || (i % 4),
				'copy_time', random() * 1000, i % 20, now(), 1, i / 400, 'bench-' || (i % 10), 'bench-2core'
			FROM generate_series(1, $1) i`, rows); err != nil {
			b.Fatal(err)
		}
	}
	var size int64
	if err := tx.QueryRow(ctx, "SELECT pg_total_relation_size('size_samples')").Scan(&size); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(size)/rows, "bytes/sample")
}
