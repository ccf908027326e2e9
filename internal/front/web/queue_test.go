package web

import (
	"context"
	"testing"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/store"
)

// testQueue is the River queue on a test's store for jobs of one machine
// class, which no daemon of these tests takes.
type testQueue struct {
	t     *testing.T
	q     *jobs.Queue
	class string
}

func newTestQueue(t *testing.T, st *store.Store, class string) *testQueue {
	t.Helper()
	q, err := jobs.NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	return &testQueue{t: t, q: q, class: class}
}

// enqueue is a Config.Enqueue that queues a request as a bisection or a
// comparison by its kind, once check (if any) lets it through; check
// stands for the application's validation.
func (tq *testQueue) enqueue(check func(Request) error) func(context.Context, Request) (int64, error) {
	return func(ctx context.Context, r Request) (int64, error) {
		if check != nil {
			if err := check(r); err != nil {
				return 0, err
			}
		}
		var req app.Request = app.BisectRequest{Scenario: r.Scenario, Good: r.Good, Bad: r.Bad, Metric: r.Metric, Point: r.Point}
		if r.Kind == "compare" {
			req = app.CompareRequest{Scenario: r.Scenario, A: r.A, B: r.B, Point: r.Point, MinEffect: r.MinEffect}
		}
		row, err := tq.q.Enqueue(ctx, req, tq.class)
		if err != nil {
			return 0, err
		}
		return row.ID, nil
	}
}

// jobs are the class's jobs not finished.
func (tq *testQueue) jobs() []jobs.Job {
	all, err := tq.q.Jobs(context.Background(), 0)
	if err != nil {
		tq.t.Fatal(err)
	}
	var out []jobs.Job
	for _, j := range all {
		if j.Class == tq.class {
			out = append(out, j)
		}
	}
	return out
}
