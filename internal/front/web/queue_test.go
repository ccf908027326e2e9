package web

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
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

// TestQueueEnqueue: the dashboard's Queue queues a checked request as the
// daemon's job, and refuses with the field at fault what app.Check or the
// daemon would refuse, queueing nothing.
func TestQueueEnqueue(t *testing.T) {
	st := storetest.Store(t)
	tq := newTestQueue(t, st, "web-queue-enqueue")
	dir, err := filepath.Abs("../../../configs/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	q := Queue{Jobs: tq.q, Class: tq.class, Scenarios: app.Scenarios{Dirs: []string{dir}}}
	ctx := context.Background()
	id, err := q.Enqueue(ctx, Request{Kind: "bisect", Scenario: "copy-single", Good: "REL_15_0", Bad: "REL_16_0"})
	if err != nil {
		t.Fatal(err)
	}
	js := tq.jobs()
	var args struct {
		Request app.BisectRequest `json:"request"`
	}
	if len(js) != 1 || js[0].ID != id || js[0].Kind != "bisect" || json.Unmarshal(js[0].Args, &args) != nil ||
		args.Request.Requester != "dashboard" || args.Request.Good != "REL_15_0" {
		t.Fatalf("queued %+v (%+v), want job %d: the bisection asked for", js, args, id)
	}
	for _, c := range []struct {
		r     Request
		field string
	}{
		{Request{Kind: "bisect", Scenario: "copy-singel", Good: "A", Bad: "B"}, "scenario"},
		{Request{Kind: "compare", Scenario: "../../etc/passwd", A: "A", B: "B"}, "scenario"},
		{Request{Kind: "run", Scenario: "copy-single"}, "kind"},
	} {
		_, err := q.Enqueue(ctx, c.r)
		var fe *FieldError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: %v, want an invalid %s", c.r, err, c.field)
		}
	}
	if n := len(tq.jobs()); n != 1 {
		t.Errorf("%d jobs after the refused requests, want 1", n)
	}
}
