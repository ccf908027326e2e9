package app

import (
	"context"
	"fmt"
	"strings"
)

// Job is what the daemon running a queued request tells its operation.
type Job struct {
	// Events names the job's events stream (store.AppendEvent), where
	// its requester follows it from another process.
	Events string
	// NoPosts says the daemon posts nothing ('pgbisect daemon --no-post'):
	// a nightly pass then queues no posting of its findings.
	NoPosts bool
	// Enqueue queues a follow-up request for the job's machine class (a
	// nightly pass's findings, to post).
	Enqueue func(context.Context, Request) error
}

// RunJob runs queued request r: the operation of its kind. The results go
// to sink, the job's log (a bisection's as a KindBisected event).
func (a *App) RunJob(ctx context.Context, j Job, r Request, sink Sink) error {
	if err := CheckQueued(r); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	q, ok := r.(runnable)
	if !ok { // TestKindsTable keeps the table and the operations in step
		return fmt.Errorf("a %s request is queued but has no operation (runJob)", r.Kind())
	}
	return q.runJob(ctx, a, j, sink)
}

// runnable is a request the daemon runs: its kind's operation as a job.
type runnable interface {
	Request
	runJob(ctx context.Context, a *App, j Job, sink Sink) error
}

// runJob runs the bisection, its events recorded under the job's stream,
// and passes its result to the job's log.
func (r BisectRequest) runJob(ctx context.Context, a *App, j Job, sink Sink) error {
	sink.note("pgbisect bisect %s", strings.Join(r.Args(), " "))
	out, err := a.Bisect(ctx, j.Events, r, sink)
	if err != nil {
		return err
	}
	sink.emit(Event{Kind: KindBisected, Bisection: out.State.ID, Bisected: out})
	return nil
}

// runJob runs the comparison. A comparison records no events of its own:
// they are journaled under the job's stream, so its requester can follow
// it from another machine.
func (r CompareRequest) runJob(ctx context.Context, a *App, j Job, sink Sink) error {
	st, err := a.Store(ctx)
	if err != nil {
		return err
	}
	_, err = a.compareDone(ctx, r, false, Journal(ctx, st, j.Events, sink, a.log))
	return err
}

// runJob runs the nightly pass; its findings are posted by a post job of
// their own, retried on its own.
func (r NightlyRequest) runJob(ctx context.Context, a *App, j Job, sink Sink) error {
	r.Deliver = false
	res, err := a.Nightly(ctx, r, sink)
	if res != nil {
		sink.note("nightly result: %s at %s, %d findings", res.Run.Status, res.Run.Commit, len(res.Findings))
		if !j.NoPosts && len(res.Findings) > 0 && j.Enqueue != nil {
			if qerr := j.Enqueue(context.WithoutCancel(ctx), DeliverRequest{}); qerr != nil {
				sink.note("not queued for posting: %v", qerr)
			}
		}
	}
	return err
}

// runJob posts the pending findings.
func (r DeliverRequest) runJob(ctx context.Context, a *App, _ Job, sink Sink) error {
	return a.Deliver(ctx, r, sink)
}
