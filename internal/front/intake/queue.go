package intake

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbisect/pgbisect/internal/front/jobs"
)

// queue is the job queue of a Dispatcher: it queues the commands' jobs,
// says whether one may still run, and answers status and cancel.
type queue struct {
	jobs  *jobs.Queue
	class string
}

// enqueue queues req's job in tx.
func (q queue) enqueue(ctx context.Context, tx pgx.Tx, req Request) (string, string, error) {
	row, err := q.jobs.EnqueueTx(ctx, tx, req.Request, q.class)
	if err != nil {
		return "", "", err
	}
	return strconv.FormatInt(row.ID, 10), jobs.EventsOfRow(row), nil
}

// pending says whether job jobID may still run.
func (q queue) pending(ctx context.Context, jobID string) (bool, error) {
	id, err := strconv.ParseInt(jobID, 10, 64)
	if err != nil {
		return false, err
	}
	return q.jobs.Pending(ctx, id)
}

// answer runs status and cancel.
func (q queue) answer(ctx context.Context, req Request) (string, error) {
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
