package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestLeasesFenceWrites(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	if _, err := s.db.Exec(ctx, "CREATE TEMP TABLE writes (machine text, epoch bigint)"); err != nil {
		t.Fatal(err)
	}
	write := func(l Lease) error {
		return s.InLease(ctx, l, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO writes VALUES ($1, $2)", l.Machine, l.Epoch)
			return err
		})
	}
	expire := func(job string) {
		if _, err := s.db.Exec(ctx, "UPDATE job_leases SET expires_at = now() - interval '1 second' WHERE job_id = $1", job); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.AcquireLease(ctx, "job-1", "bench-a", "bench-2core", time.Minute)
	if err != nil || a.Epoch != 1 {
		t.Fatalf("first lease: %+v %v", a, err)
	}
	if _, err := s.AcquireLease(ctx, "job-1", "bench-b", "bench-2core", time.Minute); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second machine took a held lease: %v", err)
	}
	if err := write(a); err != nil {
		t.Fatal(err)
	}
	if err := s.RenewLease(ctx, &a, time.Minute); err != nil {
		t.Fatal(err)
	}

	// bench-a stops renewing (paused, cut off): its lease expires and
	// bench-b takes the job over.
	expire("job-1")
	if got, err := s.ExpiredLeases(ctx); err != nil || len(got) != 1 || got[0].Machine != "bench-a" {
		t.Errorf("expired leases: %+v %v", got, err)
	}
	b, err := s.AcquireLease(ctx, "job-1", "bench-b", "bench-2core", time.Minute)
	if err != nil || b.Epoch != 2 {
		t.Fatalf("takeover: %+v %v", b, err)
	}
	if err := write(a); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("write under the old epoch: %v, want ErrLeaseLost", err)
	}
	if err := s.RenewLease(ctx, &a, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("renewal under the old epoch: %v, want ErrLeaseLost", err)
	}
	if _, err := s.AcquireLease(ctx, "job-1", "bench-a", "bench-2core", time.Minute); !errors.Is(err, ErrLeaseHeld) {
		t.Errorf("bench-a took back a lease bench-b holds: %v", err)
	}
	if err := write(b); err != nil {
		t.Fatal(err)
	}
	// bench-b restarts and takes its own lease again: a new epoch, and the
	// old process's writes are refused.
	b2, err := s.AcquireLease(ctx, "job-1", "bench-b", "bench-2core", time.Minute)
	if err != nil || b2.Epoch != 3 {
		t.Fatalf("restart: %+v %v", b2, err)
	}
	if err := write(b); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("write of the process before the restart: %v", err)
	}
	var n int
	s.db.QueryRow(ctx, "SELECT count(*) FROM writes WHERE machine = 'bench-a' AND epoch = 1").Scan(&n)
	if n != 1 {
		t.Errorf("%d writes of bench-a's first epoch, want 1 (the one before the takeover)", n)
	}
	if err := s.ReleaseLease(ctx, b2); err != nil {
		t.Fatal(err)
	}
	if err := write(b2); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("write after release: %v", err)
	}
}

func TestKeepLeaseReportsATakeover(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := Open(ctx, Config{URL: testSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.AcquireLease(ctx, "job-2", "bench-a", "", 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan error, 1)
	go s.KeepLease(ctx, a, 1500*time.Millisecond, func(err error) { lost <- err })
	// Renewals keep it: after several lease periods it still holds.
	time.Sleep(3 * time.Second)
	select {
	case err := <-lost:
		t.Fatalf("a kept lease was reported lost: %v", err)
	default:
	}
	if _, err := s.db.Exec(ctx, "UPDATE job_leases SET epoch = epoch + 1, machine = 'bench-b' WHERE job_id = 'job-2'"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lost:
		if !errors.Is(err, ErrLeaseLost) {
			t.Errorf("lost with %v, want ErrLeaseLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a taken-over lease was never reported lost")
	}
}
