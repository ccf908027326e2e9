package intake

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbisect/pgbisect/internal/front/jobs"
)

// Queue is where a Dispatcher's commands' jobs go: NewQueue's River queue
// in pgbisect, a fake in tests.
type Queue interface {
	// Enqueue queues req's job in tx, the transaction that records the
	// comment, and returns the job's id and its events stream (which
	// Follow reads for the job's milestones; "" follows nothing).
	Enqueue(ctx context.Context, tx pgx.Tx, req Request) (jobID, events string, err error)
	// Pending says whether job jobID may still run (queued, running, or
	// waiting for a retry): a failed attempt is then not the end of its
	// answer.
	Pending(ctx context.Context, jobID string) (bool, error)
	// Answer runs an answer-only request (status, cancel) and returns the
	// reply.
	Answer(ctx context.Context, req Request) (string, error)
}

// NewQueue returns the Queue of the River queue q, for jobs of machine
// class ("": the default).
func NewQueue(q *jobs.Queue, class string) Queue { return queue{jobs: q, class: class} }

// queue is the Queue on River.
type queue struct {
	jobs  *jobs.Queue
	class string
}

// Enqueue implements Queue.
func (q queue) Enqueue(ctx context.Context, tx pgx.Tx, req Request) (string, string, error) {
	row, err := q.jobs.EnqueueTx(ctx, tx, req.Request, q.class)
	if err != nil {
		return "", "", err
	}
	return strconv.FormatInt(row.ID, 10), jobs.EventsOfRow(row), nil
}

// Pending implements Queue.
func (q queue) Pending(ctx context.Context, jobID string) (bool, error) {
	id, err := strconv.ParseInt(jobID, 10, 64)
	if err != nil {
		return false, err
	}
	return q.jobs.Pending(ctx, id)
}

// Answer implements Queue: status lists the jobs, cancel cancels one.
func (q queue) Answer(ctx context.Context, req Request) (string, error) {
	if req.Kind == "cancel" {
		row, err := q.jobs.Cancel(ctx, req.Job)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("job %d (%s) is %s.", row.ID, row.Kind, row.State), nil
	}
	js, err := q.jobs.Jobs(ctx, 0)
	if err != nil {
		return "", err
	}
	var running, queued []string
	for _, j := range js {
		line := fmt.Sprintf("job %d %s (%s)", j.ID, j.Kind, j.Class)
		if j.State == "running" {
			running = append(running, line+" on "+j.Machine+", started "+j.Started.UTC().Format(time.RFC3339))
		} else {
			queued = append(queued, line+", "+j.State)
		}
	}
	if len(js) == 0 {
		return "nothing is running or queued.", nil
	}
	out := fmt.Sprintf("%d running, %d queued:", len(running), len(queued))
	for _, l := range append(running, queued...) {
		out += "\n- " + l
	}
	return out, nil
}
