package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/store"
)

// Queue inserts and lists jobs; it runs none (River's insert-only client).
type Queue struct {
	st     *store.Store
	client *river.Client[pgx.Tx]
}

// NewQueue returns the queue of the results store st.
func NewQueue(st *store.Store) (*Queue, error) {
	if st.Pool() == nil {
		return nil, errors.New("jobs: the queue needs a results store opened on a pool")
	}
	c, err := river.NewClient(riverpgxv5.New(st.Pool()), &river.Config{})
	if err != nil {
		return nil, fmt.Errorf("opening the job queue: %w", err)
	}
	return &Queue{st: st, client: c}, nil
}

// EnqueueTx queues request r for a machine of class in tx, so that the job
// exists exactly when what tx records does (a GitHub comment acted on).
func (q *Queue) EnqueueTx(ctx context.Context, tx pgx.Tx, r app.Request, class string) (*rivertype.JobRow, error) {
	args, opts, err := NewArgs(r, class)
	if err != nil {
		return nil, err
	}
	res, err := q.client.InsertTx(ctx, tx, args, opts)
	if err != nil {
		return nil, fmt.Errorf("queueing a %s job: %w", r.Kind(), err)
	}
	return res.Job, nil
}

// EventsOfRow is the events stream of a queued job (EventsOf its key).
func EventsOfRow(row *rivertype.JobRow) string {
	var c Common
	if err := json.Unmarshal(row.EncodedArgs, &c); err != nil || c.Key == "" {
		return ""
	}
	return EventsOf(c.Key)
}

// Enqueue queues request r for a machine of class and returns the job.
func (q *Queue) Enqueue(ctx context.Context, r app.Request, class string) (*rivertype.JobRow, error) {
	args, opts, err := NewArgs(r, class)
	if err != nil {
		return nil, err
	}
	res, err := q.client.Insert(ctx, args, opts)
	if err != nil {
		return nil, fmt.Errorf("queueing a %s job: %w", r.Kind(), err)
	}
	return res.Job, nil
}

// Job is a job as 'pgbisect status' shows it.
type Job struct {
	ID       int64     `json:"id"`
	Key      string    `json:"key"`
	Kind     string    `json:"kind"`
	Class    string    `json:"class"`
	State    string    `json:"state"`
	Attempt  int       `json:"attempt"`
	Machine  string    `json:"machine,omitempty"` // the last that attempted it
	Error    string    `json:"error,omitempty"`   // the last attempt's
	Created  time.Time `json:"created"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	// Args are the job's arguments: its key, class and request.
	Args json.RawMessage `json:"args"`
}

// Jobs lists the jobs not finished, and the last finished ones (at most
// recent; 0: none), oldest first.
func (q *Queue) Jobs(ctx context.Context, recent int) ([]Job, error) {
	open, err := q.list(ctx, river.NewJobListParams().First(1000).States(rivertype.JobStateAvailable, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled, rivertype.JobStatePending).OrderBy(river.JobListOrderByID, river.SortOrderAsc))
	if err != nil {
		return nil, err
	}
	if recent <= 0 {
		return open, nil
	}
	done, err := q.list(ctx, river.NewJobListParams().First(recent).States(rivertype.JobStateCompleted, rivertype.JobStateCancelled,
		rivertype.JobStateDiscarded).OrderBy(river.JobListOrderByID, river.SortOrderDesc))
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(done)-1; i < j; i, j = i+1, j-1 {
		done[i], done[j] = done[j], done[i]
	}
	return append(done, open...), nil
}

func (q *Queue) list(ctx context.Context, p *river.JobListParams) ([]Job, error) {
	res, err := q.client.JobList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	out := make([]Job, 0, len(res.Jobs))
	for _, r := range res.Jobs {
		out = append(out, jobOf(r))
	}
	return out, nil
}

// Job reads job id; one River no longer has (never queued, or removed by
// its cleaner) is store.ErrNotFound.
func (q *Queue) Job(ctx context.Context, id int64) (Job, error) {
	r, err := q.client.JobGet(ctx, id)
	if errors.Is(err, river.ErrNotFound) {
		return Job{}, fmt.Errorf("no job %d in the queue (finished jobs are kept for a day): %w", id, store.ErrNotFound)
	}
	if err != nil {
		return Job{}, fmt.Errorf("reading job %d: %w", id, err)
	}
	return jobOf(r), nil
}

func jobOf(r *rivertype.JobRow) Job {
	var c Common
	_ = json.Unmarshal(r.EncodedArgs, &c)
	j := Job{ID: r.ID, Key: c.Key, Kind: r.Kind, Class: r.Queue, State: string(r.State), Attempt: r.Attempt,
		Created: r.CreatedAt, Args: r.EncodedArgs}
	if r.AttemptedAt != nil {
		j.Started = *r.AttemptedAt
	}
	if r.FinalizedAt != nil {
		j.Finished = *r.FinalizedAt
	}
	if n := len(r.AttemptedBy); n > 0 {
		j.Machine = r.AttemptedBy[n-1]
	}
	if n := len(r.Errors); n > 0 {
		j.Error = r.Errors[n-1].Error
	}
	return j
}

// MoveLegacyJobs moves the jobs queued (or left running) in the queue
// pgbisect kept before River into River, for class, in one transaction,
// keeping their order. Each keeps its request; a job an older pgbisect
// queued as a command line becomes its request (app.LegacyJob.Request).
// It returns how many moved.
func (q *Queue) MoveLegacyJobs(ctx context.Context, class string) (int, error) {
	return q.st.MoveLegacyJobs(ctx, func(tx pgx.Tx, j store.LegacyJob) (int64, error) {
		r, l, err := app.DecodeRequest(j.Kind, j.Args)
		if errors.Is(err, app.ErrLegacyJob) {
			r, err = l.Request()
		}
		if err != nil {
			return 0, err
		}
		c := Common{Key: NewKey(r.Kind()), Class: class}
		if r.Kind() == (app.BisectRequest{}).Kind() {
			c.Key = fmt.Sprintf("legacy-%d", j.ID)
		}
		args, opts, err := newArgs(r, c)
		if err != nil {
			return 0, err
		}
		res, err := q.client.InsertTx(ctx, tx, args, opts)
		if err != nil {
			return 0, err
		}
		return res.Job.ID, nil
	})
}

// Pending says whether job id may still run: queued, running, scheduled or
// waiting for a retry (not completed, cancelled or discarded, nor
// removed by River's cleaner).
func (q *Queue) Pending(ctx context.Context, id int64) (bool, error) {
	row, err := q.client.JobGet(ctx, id)
	if errors.Is(err, river.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading job %d: %w", id, err)
	}
	switch row.State {
	case rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
		return false, nil
	}
	return true, nil
}

// Cancel cancels job id: a job not started never runs, a running one is
// stopped by its worker (River tells it), a finished one is left as it is.
func (q *Queue) Cancel(ctx context.Context, id int64) (*rivertype.JobRow, error) {
	row, err := q.client.JobCancel(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("cancelling job %d: %w", id, err)
	}
	return row, nil
}
