package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Jobs run on River (package internal/front/jobs), in the results database: its
// tables (river_job, river_leader, ...) are migrated with pgbisect's. What
// the store keeps of them is what River does not know: leases with fencing
// (lease.go), the machines that joined, and the rows of the queue pgbisect
// had before River, moved over once.

// Pool is the store's connection pool, for River's driver; nil for a store
// bound to a test's transaction.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// InTx runs fn in one transaction of the store (a savepoint when the store
// is bound to one), for callers that write River rows and the store's in
// one commit.
func (s *Store) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error { return s.inTx(ctx, fn) }

// leaseKey is the context key of the lease a job's writes are fenced by.
type leaseKey struct{}

// WithLease returns a context under which the store fences the writes of a
// leased job: SaveBisection and AddSamples check l's epoch in the same
// transaction as the write (CheckLease) and fail with ErrLeaseLost once
// another worker took the job over; samples record l's machine. The
// bisection engine and the samplers save as they always did; the daemon's
// worker puts the lease in the job's context.
func WithLease(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// LeaseOf returns the lease ctx carries (WithLease).
func LeaseOf(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(Lease)
	return l, ok
}

// ClassOf is the machine class of the job ctx runs under (WithLease): the
// class whose nightly series, runs and change points the store reads and
// writes. "" outside a job, and for the default class: the one-machine
// setup's series.
func ClassOf(ctx context.Context) string {
	l, _ := LeaseOf(ctx)
	return l.Class
}

// fenced runs write on the store, in a transaction checking the lease of
// ctx first when it carries one.
func (s *Store) fenced(ctx context.Context, write func(q querier) error) error {
	l, ok := LeaseOf(ctx)
	if !ok {
		return write(s.db)
	}
	return s.InLease(ctx, l, func(tx pgx.Tx) error { return write(tx) })
}

// LegacyJob is a row of the queue pgbisect kept before River.
type LegacyJob struct {
	ID       int64
	Kind     string
	Args     json.RawMessage
	Status   string // queued or running
	Worker   string
	Attempts int
	Created  time.Time
}

// MoveLegacyJobs hands each queued or running job of the old queue to move,
// oldest first, in one transaction: move inserts it into River on tx and
// returns the River job's id, and the row is marked 'moved' with that id.
// Either every job moves or none does, so running it again (a second
// daemon starting) finds nothing left. It returns how many moved.
func (s *Store) MoveLegacyJobs(ctx context.Context, move func(tx pgx.Tx, j LegacyJob) (int64, error)) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, kind, args, status, worker, attempts, created_at FROM jobs
			WHERE status IN ('queued', 'running') ORDER BY id FOR UPDATE`)
		if err != nil {
			return fmt.Errorf("reading the old job queue: %w", err)
		}
		jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LegacyJob, error) {
			var j LegacyJob
			err := r.Scan(&j.ID, &j.Kind, &j.Args, &j.Status, &j.Worker, &j.Attempts, &j.Created)
			return j, err
		})
		if err != nil {
			return fmt.Errorf("reading the old job queue: %w", err)
		}
		for _, j := range jobs {
			id, err := move(tx, j)
			if err != nil {
				return fmt.Errorf("moving job %d of the old queue to River: %w", j.ID, err)
			}
			if _, err := tx.Exec(ctx, "UPDATE jobs SET status = 'moved', river_id = $2, finished_at = now() WHERE id = $1", j.ID, id); err != nil {
				return fmt.Errorf("moving job %d of the old queue to River: %w", j.ID, err)
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// AddLegacyJob adds a row to the old queue, as a pgbisect before River did
// (for tests of MoveLegacyJobs).
func (s *Store) AddLegacyJob(ctx context.Context, kind string, args json.RawMessage) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, "INSERT INTO jobs (kind, args) VALUES ($1, $2) RETURNING id", kind, jsonOr(args, "{}")).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("adding an old-queue job: %w", err)
	}
	return id, nil
}

// Machine is a machine that joined with 'pgbisect daemon'.
type Machine struct {
	Name  string `json:"name"`
	Class string `json:"class"`
	// Host and PID are where the machine's daemon runs.
	Host      string    `json:"host,omitempty"`
	PID       int       `json:"pid"`
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"`
	// JobKey is the pgbisect job key the machine runs; "" when idle.
	JobKey  string    `json:"job_key,omitempty"`
	Stopped time.Time `json:"stopped,omitzero"`
}

// ErrMachineTaken is returned by JoinMachine when a live daemon holds the
// machine name.
var ErrMachineTaken = errors.New("machine name in use")

// JoinMachine records m as started now. A machine's name belongs to one
// daemon at a time: the row of an earlier daemon of that name is taken
// over only when that daemon stopped, when its heartbeat is older than
// stale (a dead host), or when it ran on m's host and gone(pid) says its
// process is gone (a restart after a crash). Otherwise JoinMachine fails
// with ErrMachineTaken, naming the machine and what to do.
func (s *Store) JoinMachine(ctx context.Context, m Machine, stale time.Duration, gone func(pid int) bool) error {
	// join takes the row if it is free, or held by deadPID on this host.
	join := func(deadPID int) (bool, error) {
		tag, err := s.db.Exec(ctx, `INSERT INTO machines AS m (name, class, host, pid) VALUES ($1, $2, $3, $4)
		ON CONFLICT (name) DO UPDATE SET class = excluded.class, host = excluded.host, pid = excluded.pid, started_at = now(),
			heartbeat_at = now(), job_key = '', stopped_at = NULL
		WHERE m.stopped_at IS NOT NULL OR m.heartbeat_at <= now() - $5 * interval '1 microsecond'
			OR (m.host = excluded.host AND m.pid IN (excluded.pid, $6))`, m.Name, m.Class, m.Host, m.PID, stale.Microseconds(), deadPID)
		return tag.RowsAffected() == 1, err
	}
	ok, err := join(-1)
	if err != nil {
		return fmt.Errorf("recording machine %s: %w", m.Name, err)
	}
	if ok {
		return nil
	}
	var host string
	var pid int
	var age time.Duration
	err = s.db.QueryRow(ctx, `SELECT host, pid, (extract(epoch FROM now() - heartbeat_at) * 1e6)::bigint * interval '1 microsecond'
		FROM machines WHERE name = $1`, m.Name).Scan(&host, &pid, &age)
	if err != nil {
		return fmt.Errorf("recording machine %s: %w", m.Name, err)
	}
	if host == m.Host && gone != nil && gone(pid) {
		// This host's daemon of that name died without leaving: its row
		// is this one's to take.
		if ok, err := join(pid); err != nil || !ok {
			return fmt.Errorf("recording machine %s: taken by another daemon at the same time (%v)", m.Name, err)
		}
		return nil
	}
	where := "on host " + host
	if host == "" {
		where = "on an unrecorded host"
	}
	return fmt.Errorf("%w: machine %q is live: a daemon with pid %d %s beat its heartbeat %s ago; "+
		"give this daemon another name with --machine NAME, or stop that daemon (a dead host's name is taken over once its heartbeat is %s old)",
		ErrMachineTaken, m.Name, pid, where, age.Round(time.Second), stale)
}

// Heartbeat records that machine is alive and runs jobKey ("" idle).
func (s *Store) Heartbeat(ctx context.Context, machine, jobKey string) error {
	if _, err := s.db.Exec(ctx, "UPDATE machines SET heartbeat_at = now(), job_key = $2 WHERE name = $1", machine, jobKey); err != nil {
		return fmt.Errorf("heartbeat of machine %s: %w", machine, err)
	}
	return nil
}

// LeaveMachine records that machine stopped.
func (s *Store) LeaveMachine(ctx context.Context, machine string) error {
	if _, err := s.db.Exec(ctx, "UPDATE machines SET stopped_at = now(), job_key = '' WHERE name = $1", machine); err != nil {
		return fmt.Errorf("recording machine %s stopped: %w", machine, err)
	}
	return nil
}

// Machines lists the machines that joined, by name.
func (s *Store) Machines(ctx context.Context) ([]Machine, error) {
	rows, err := s.db.Query(ctx, "SELECT name, class, host, pid, started_at, heartbeat_at, job_key, stopped_at FROM machines ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Machine, error) {
		var m Machine
		var stopped *time.Time
		err := r.Scan(&m.Name, &m.Class, &m.Host, &m.PID, &m.Started, &m.Heartbeat, &m.JobKey, &stopped)
		m.Stopped = nullTime(stopped)
		return m, err
	})
}
