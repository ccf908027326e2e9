package web

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
)

// Enqueuer queues a valid request and returns its job id; errors wrapping
// ErrInvalid are the request's fault.
type Enqueuer interface {
	Enqueue(ctx context.Context, r Request) (int64, error)
}

// EnqueueFunc is a function as an Enqueuer.
type EnqueueFunc func(ctx context.Context, r Request) (int64, error)

// Enqueue implements Enqueuer.
func (f EnqueueFunc) Enqueue(ctx context.Context, r Request) (int64, error) { return f(ctx, r) }

// Queue is the dashboard's Enqueuer: it queues bisections and comparisons
// in Jobs for the machine class Class ("": the default), each checked first
// as far as it can be without the repository (app.Check: a scenario name
// from Scenarios, never a path; the metric and the point), so a request
// that cannot run is refused now rather than failing in the queue.
type Queue struct {
	Jobs      *jobs.Queue
	Class     string
	Scenarios app.Scenarios
}

// Enqueue implements Enqueuer.
func (q Queue) Enqueue(ctx context.Context, r Request) (int64, error) {
	invalid := func(field string, err error) error {
		return fmt.Errorf("%w: %w", ErrInvalid, &FieldError{Field: field, Msg: err.Error()})
	}
	req, err := r.appRequest()
	if err != nil {
		return 0, invalid("kind", err)
	}
	if req, err = app.Check(req, q.Scenarios); err != nil {
		var ce *app.CheckError
		if errors.As(err, &ce) {
			return 0, invalid(ce.Field, ce.Err)
		}
		return 0, invalid("", err)
	}
	job, err := q.Jobs.Enqueue(ctx, req, q.Class)
	if err != nil {
		return 0, err
	}
	return job.ID, nil
}

// appRequest is the application's request r asks for.
func (r Request) appRequest() (app.Request, error) {
	switch r.Kind {
	case "bisect":
		return app.BisectRequest{Scenario: r.Scenario, Good: r.Good, Bad: r.Bad, Metric: r.Metric, Point: r.Point,
			MinEffect: r.MinEffect, MaxSamples: r.MaxSamples, Requester: "dashboard"}, nil
	case "compare":
		return app.CompareRequest{Scenario: r.Scenario, A: r.A, B: r.B, Point: r.Point, MinEffect: r.MinEffect, MaxSamples: r.MaxSamples}, nil
	}
	return nil, fmt.Errorf("%q is not a request the daemon runs", r.Kind)
}
