package jobs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// nopOps finish every job at once: the benchmark measures the queue.
type nopOps struct{}

func (nopOps) RunJob(context.Context, app.Job, app.Request, app.Sink) error { return nil }

// BenchmarkJobs measures the jobs per second the queue sustains through
// the whole path of a job: River's fetch and completion, pgbisect's lease
// taken and released, the heartbeat; with 1, 4 and 16 daemons (machines) of one
// class, each running one job at a time as a benchmark machine does.
//
//	go test -run '^$' -bench BenchmarkJobs -benchtime 500x ./internal/front/jobs/
func BenchmarkJobs(b *testing.B) {
	for _, machines := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("machines=%d", machines), func(b *testing.B) { benchJobs(b, machines) })
	}
}

func benchJobs(b *testing.B, machines int) {
	st := storetest.Store(b)
	ctx := context.Background()
	q, err := NewQueue(st)
	if err != nil {
		b.Fatal(err)
	}
	class := fmt.Sprintf("bench-%d-%d", machines, time.Now().UnixNano())
	params := make([]river.InsertManyParams, b.N)
	for i := range params {
		args, opts, err := NewArgs(app.BisectRequest{Resume: "x"}, class)
		if err != nil {
			b.Fatal(err)
		}
		params[i] = river.InsertManyParams{Args: args, InsertOpts: opts}
	}
	if _, err := q.client.InsertMany(ctx, params); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, machines)
	for m := range machines {
		d, err := New(Config{Store: st, Ops: nopOps{}, Machine: fmt.Sprintf("%s-m%d", class, m), Class: class, LeaseTTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			_ = d.Run(rctx)
			done <- struct{}{}
		}()
	}
	for {
		var left int
		if err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM river_job WHERE queue = $1 AND state <> 'completed'", class).Scan(&left); err != nil {
			b.Fatal(err)
		}
		if left == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	cancel()
	for range machines {
		<-done
	}
}
