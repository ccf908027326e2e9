package app

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// The request kinds, listed once. Each row is a kind's request type and,
// for a kind the daemon runs, how its jobs are queued; the operation a job
// runs is the request's runJob method (below). DecodeRequest, the job
// queue (internal/front/jobs, whose job arguments must name the same
// kinds: its tests check) and the error messages read this table.
//
// A new job kind is: its request type (request.go), a row here, its
// runJob, and its job arguments in internal/front/jobs.
var kinds = []kindSpec{
	{BisectRequest{}, &JobPolicy{Attempts: 3}},
	{CompareRequest{}, &JobPolicy{Attempts: 3}},
	{RunRequest{}, nil},
	{NightlyRequest{}, &JobPolicy{Attempts: 3, OnePerTick: true}},
	{DeliverRequest{}, &JobPolicy{Attempts: 20, Posts: true}},
}

// kindSpec is a row of kinds.
type kindSpec struct {
	// zero is a zero request of the kind: its type is the one decoded.
	zero Request
	// job is how the daemon queues the kind; nil: it runs no such job.
	job *JobPolicy
}

// JobPolicy is how the jobs of a request kind are queued and retried.
type JobPolicy struct {
	// Attempts is how many times a job is tried before it is given up.
	Attempts int
	// Posts marks a job that only posts to GitHub: it needs no benchmark
	// machine (every daemon takes it, beside its class's job) and is
	// retried with a backoff that GitHub's rate limits ask for.
	Posts bool
	// OnePerTick makes one job of a schedule's tick per class, however
	// many daemons enqueue it (a nightly pass).
	OnePerTick bool
}

// kindOf returns the row of kind, or nil.
func kindOf(kind string) *kindSpec {
	for i := range kinds {
		if kinds[i].zero.Kind() == kind {
			return &kinds[i]
		}
	}
	return nil
}

// QueuedKinds are the kinds of the requests the daemon runs as jobs.
func QueuedKinds() []string {
	var out []string
	for _, k := range kinds {
		if k.job != nil {
			out = append(out, k.zero.Kind())
		}
	}
	return out
}

// QueuePolicy says how the jobs of kind are queued; false when the daemon
// runs no such job.
func QueuePolicy(kind string) (JobPolicy, bool) {
	k := kindOf(kind)
	if k == nil || k.job == nil {
		return JobPolicy{}, false
	}
	return *k.job, true
}

// CheckQueued says why r cannot be queued, or nil.
func CheckQueued(r Request) error {
	if _, ok := QueuePolicy(r.Kind()); !ok {
		return fmt.Errorf("a %s request cannot be queued: the daemon runs %s", r.Kind(), strings.Join(QueuedKinds(), ", "))
	}
	return nil
}

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
	q, ok := r.(queued)
	if err := CheckQueued(r); err != nil || !ok {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return q.runJob(ctx, a, j, sink)
}

// queued is a request the daemon runs: its kind's operation as a job.
type queued interface {
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
	_, err = a.Compare(ctx, r, Journal(ctx, st, j.Events, sink, a.log))
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

// unknownKind is the error for a kind not in the table.
func unknownKind(kind string) error {
	var names []string
	for _, k := range kinds {
		names = append(names, k.zero.Kind())
	}
	// %.64q: a kind is a short word; the error quotes no more of one
	// (FuzzDecodeRequest).
	return fmt.Errorf("unknown request kind %.64q (this pgbisect knows %s)", kind, strings.Join(names, ", "))
}

// decode reads a request of the row's type from its JSON, refusing fields
// the type does not have.
func (k *kindSpec) decode(args json.RawMessage) (Request, error) {
	r := reflect.New(reflect.TypeOf(k.zero))
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(r.Interface()); err != nil {
		return nil, err
	}
	return r.Elem().Interface().(Request), nil
}
