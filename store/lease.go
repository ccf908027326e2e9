package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Lease is a machine's claim on a running job. Epoch grows with every
// takeover; a write made under an older epoch is refused.
type Lease struct {
	JobID   string
	Machine string
	Class   string
	Epoch   int64
	Expires time.Time // by the database's clock
}

// ErrLeaseHeld is returned by AcquireLease when another machine holds an
// unexpired lease on the job.
var ErrLeaseHeld = errors.New("another machine holds the job's lease")

// ErrLeaseLost is returned when a lease expired and was taken over (or
// released): the holder must stop the job and its servers.
var ErrLeaseLost = errors.New("the job's lease was lost to another machine")

// AcquireLease takes the lease on jobID for machine for ttl: a new lease,
// an expired one (a takeover, which bumps the epoch), or one this machine
// already holds (a restart; the epoch is bumped too, so the writes of the
// process before it are refused).
func (s *Store) AcquireLease(ctx context.Context, jobID, machine, class string, ttl time.Duration) (Lease, error) {
	l := Lease{JobID: jobID, Machine: machine, Class: class}
	err := s.db.QueryRow(ctx, `
		INSERT INTO job_leases AS l (job_id, machine, class, epoch, expires_at)
		VALUES ($1, $2, $3, 1, now() + $4 * interval '1 microsecond')
		ON CONFLICT (job_id) DO UPDATE
			SET machine = excluded.machine, class = excluded.class, epoch = l.epoch + 1,
			    expires_at = excluded.expires_at, taken_at = now()
			WHERE l.expires_at <= now() OR l.machine = excluded.machine
		RETURNING epoch, expires_at`, jobID, machine, class, ttl.Microseconds()).Scan(&l.Epoch, &l.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		var holder string
		var until time.Time
		if err := s.db.QueryRow(ctx, "SELECT machine, expires_at FROM job_leases WHERE job_id = $1", jobID).Scan(&holder, &until); err == nil {
			return Lease{}, fmt.Errorf("job %s: %w (%s, until %s)", jobID, ErrLeaseHeld, holder, until.UTC().Format(time.RFC3339))
		}
		return Lease{}, fmt.Errorf("job %s: %w", jobID, ErrLeaseHeld)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("taking the lease of job %s: %w", jobID, err)
	}
	return l, nil
}

// RenewLease extends l by ttl from now, by the database's clock. It
// returns ErrLeaseLost when l's epoch no longer holds the job.
func (s *Store) RenewLease(ctx context.Context, l *Lease, ttl time.Duration) error {
	err := s.db.QueryRow(ctx, `
		UPDATE job_leases SET expires_at = now() + $3 * interval '1 microsecond'
		WHERE job_id = $1 AND epoch = $2 AND expires_at > now()
		RETURNING expires_at`, l.JobID, l.Epoch, ttl.Microseconds()).Scan(&l.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("job %s, epoch %d: %w", l.JobID, l.Epoch, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("renewing the lease of job %s: %w", l.JobID, err)
	}
	return nil
}

// ReleaseLease ends l (the job finished or was handed back). The row stays,
// with no machine and expired, so the next holder's epoch is still higher:
// epochs of a job only ever grow.
func (s *Store) ReleaseLease(ctx context.Context, l Lease) error {
	if _, err := s.db.Exec(ctx, `UPDATE job_leases SET machine = '', expires_at = least(expires_at, now())
		WHERE job_id = $1 AND epoch = $2`, l.JobID, l.Epoch); err != nil {
		return fmt.Errorf("releasing the lease of job %s: %w", l.JobID, err)
	}
	return nil
}

// HandBackLease ends l when it is still the job's latest epoch (it expired
// unrenewed, the database unreachable for longer than the TTL, and no
// machine took the job over): the epoch is bumped, so l's writes are
// refused from now on, and the lease is left expired now with no machine,
// for the next worker (the reaper leaves a lease that ended less than 10
// seconds ago alone, while the holder's row is rescheduled). It reports
// false when another machine has taken or fenced the job meanwhile.
func (s *Store) HandBackLease(ctx context.Context, l Lease) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE job_leases SET epoch = epoch + 1, machine = '', expires_at = now()
		WHERE job_id = $1 AND epoch = $2`, l.JobID, l.Epoch)
	if err != nil {
		return false, fmt.Errorf("handing back the lease of job %s: %w", l.JobID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// CheckLease is the fence: inside tx, before a job's write, it checks that
// l still holds the job and keeps the lease row locked (FOR SHARE) until
// tx ends, so no takeover can commit between the check and the write.
func CheckLease(ctx context.Context, tx pgx.Tx, l Lease) error {
	var ok bool
	err := tx.QueryRow(ctx, `SELECT true FROM job_leases WHERE job_id = $1 AND epoch = $2 AND expires_at > now() FOR SHARE`,
		l.JobID, l.Epoch).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("job %s, epoch %d: %w", l.JobID, l.Epoch, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("checking the lease of job %s: %w", l.JobID, err)
	}
	return nil
}

// InLease runs fn in a transaction fenced by l (CheckLease first).
func (s *Store) InLease(ctx context.Context, l Lease, fn func(tx pgx.Tx) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := CheckLease(ctx, tx, l); err != nil {
			return err
		}
		return fn(tx)
	})
}

// ExpiredLeases lists the leases past their expiry, oldest first, for the
// reaper that hands their jobs to other workers. Released and handed-over
// leases (no machine) are not listed.
func (s *Store) ExpiredLeases(ctx context.Context) ([]Lease, error) {
	rows, err := s.db.Query(ctx, "SELECT job_id, machine, class, epoch, expires_at FROM job_leases WHERE expires_at <= now() AND machine <> '' ORDER BY expires_at")
	if err != nil {
		return nil, fmt.Errorf("listing expired leases: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
		var l Lease
		err := r.Scan(&l.JobID, &l.Machine, &l.Class, &l.Epoch, &l.Expires)
		return l, err
	})
}

// FenceOut ends any lease on jobID inside tx, unless a live one holds it
// (live reports that, and nothing changes): the epoch is bumped, so writes
// of the last holder are refused from the commit of tx on, and the lease is
// left with no machine for the next worker to take (epoch + 1 again). A job
// that never had a lease gets one of epoch 1 with no machine. The reaper
// calls it in the transaction that moves the job to another worker.
func FenceOut(ctx context.Context, tx pgx.Tx, jobID string) (live bool, err error) {
	err = tx.QueryRow(ctx, `SELECT machine <> '' AND expires_at > now() FROM job_leases WHERE job_id = $1 FOR UPDATE`, jobID).Scan(&live)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("fencing out job %s: %w", jobID, err)
	}
	if live {
		return true, nil
	}
	_, err = tx.Exec(ctx, `INSERT INTO job_leases AS l (job_id, machine, epoch, expires_at) VALUES ($1, '', 1, now())
		ON CONFLICT (job_id) DO UPDATE SET epoch = l.epoch + 1, machine = '', expires_at = least(l.expires_at, now())`, jobID)
	if err != nil {
		return false, fmt.Errorf("fencing out job %s: %w", jobID, err)
	}
	return false, nil
}

// ActiveLeases lists the unexpired leases: which machine runs which job.
func (s *Store) ActiveLeases(ctx context.Context) ([]Lease, error) {
	rows, err := s.db.Query(ctx, "SELECT job_id, machine, class, epoch, expires_at FROM job_leases WHERE expires_at > now() AND machine <> '' ORDER BY job_id")
	if err != nil {
		return nil, fmt.Errorf("listing leases: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
		var l Lease
		err := r.Scan(&l.JobID, &l.Machine, &l.Class, &l.Epoch, &l.Expires)
		return l, err
	})
}

// KeepLease renews l every ttl/3 until ctx ends, and calls lost (once) when
// the lease cannot be kept: taken over, or not renewed before it expired
// (the database unreachable for longer than ttl). The caller cancels the
// job's context in lost, which stops the job and its servers.
func (s *Store) KeepLease(ctx context.Context, l Lease, ttl time.Duration, lost func(error)) {
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.RenewLease(ctx, &l, ttl)
		if err == nil || ctx.Err() != nil {
			continue
		}
		if errors.Is(err, ErrLeaseLost) || time.Now().After(l.Expires) {
			lost(err)
			return
		}
		// A transient failure with time left on the lease: try again.
	}
}
