package store

import (
	"context"
	"errors"
	"strings"
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
	// Renewals keep it: wait, on the database's clock, until the first
	// expiry is a whole lease period past; the lease must hold throughout.
	deadline := time.After(30 * time.Second)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for past := false; !past; {
		select {
		case err := <-lost:
			t.Fatalf("a kept lease was reported lost: %v", err)
		case <-deadline:
			t.Fatal("the database's clock did not pass the lease's first expiry within 30s")
		case <-poll.C:
		}
		var held bool
		err := s.db.QueryRow(ctx, `SELECT expires_at > now() AND epoch = $2, now() > $3::timestamptz + $4 * interval '1 microsecond'
			FROM job_leases WHERE job_id = $1`, "job-2", a.Epoch, a.Expires, (1500*time.Millisecond).Microseconds()).Scan(&held, &past)
		if err != nil {
			t.Fatal(err)
		}
		if !held {
			t.Fatal("the lease expired or changed hands while KeepLease was renewing it")
		}
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

// TestJobWritesPerMachineClass: under a job's lease, samples and
// environments record the machine, nightly runs the class; series and the
// last night are read per class, so two classes never mix; and a write
// under a lease that was fenced out (a reaper moved the job) is refused.
func TestJobWritesPerMachineClass(t *testing.T) {
	s := testStore(t)
	bg := context.Background()
	night := func(ctx context.Context, commit string, v float64) {
		t.Helper()
		r := NightlyRun{Branch: "class-test", Commit: commit, Status: "ok"}
		if err := s.RecordNightly(ctx, &r); err != nil {
			t.Fatal(err)
		}
		env, err := s.Environment(ctx, []byte(`{"cpu": "same"}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.AddSamples(ctx, []Sample{{BuildKey: commit, Commit: commit, Scenario: "sc", Metric: "m", Value: v, NightlyID: r.ID, EnvironmentID: env}}); err != nil {
			t.Fatal(err)
		}
	}
	la, err := s.AcquireLease(bg, "night-a", "bench-a", "bench-2core", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := s.AcquireLease(bg, "night-b", "big-1", "bench-64core", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := WithLease(bg, la), WithLease(bg, lb)
	night(bg, "c0", 1)
	night(ca, "c1", 2)
	night(cb, "c1", 3)
	for _, c := range []struct {
		ctx  context.Context
		want float64
	}{{bg, 1}, {ca, 2}, {cb, 3}} {
		pts, err := s.Series(c.ctx, "class-test", "sc", "m", "")
		if err != nil || len(pts) != 1 || len(pts[0].Values) != 1 || pts[0].Values[0] != c.want {
			t.Errorf("series of class %q: %+v %v, want the one night of value %g", ClassOf(c.ctx), pts, err, c.want)
		}
		last, err := s.LastNightly(c.ctx, "class-test")
		if err != nil || (c.want == 1) != (last.Commit == "c0") {
			t.Errorf("last night of class %q: %+v %v", ClassOf(c.ctx), last, err)
		}
	}
	ss, err := s.Samples(bg, SampleQuery{Commit: "c1", Scenario: "sc", Metric: "m"})
	if err != nil || len(ss) != 2 {
		t.Fatalf("samples of c1: %+v %v", ss, err)
	}
	machines := map[string]string{}
	for _, sm := range ss {
		machines[sm.Machine] = sm.MachineClass
		info, err := s.EnvironmentInfo(bg, sm.EnvironmentID)
		if err != nil || string(info) != `{"cpu": "same"}` {
			t.Errorf("environment %d: %s %v", sm.EnvironmentID, info, err)
		}
	}
	if machines["bench-a"] != "bench-2core" || machines["big-1"] != "bench-64core" || ss[0].EnvironmentID == ss[1].EnvironmentID {
		t.Errorf("samples %+v: want each with its machine, class and own environment row", ss)
	}
	// A reaper fences the job out: the old holder's next sample is refused.
	if err := s.inTx(bg, func(tx pgx.Tx) error { _, err := FenceOut(bg, tx, "night-a"); return err }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(bg, "UPDATE job_leases SET expires_at = now() - interval '1 second' WHERE job_id = 'night-a'"); err != nil {
		t.Fatal(err)
	}
	if err := s.inTx(bg, func(tx pgx.Tx) error { _, err := FenceOut(bg, tx, "night-a"); return err }); err != nil {
		t.Fatal(err)
	}
	err = s.AddSamples(ca, []Sample{{BuildKey: "c2", Commit: "c2", Scenario: "sc", Metric: "m", Value: 9}})
	if !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a sample after the job was fenced out: %v, want ErrLeaseLost", err)
	}
}

// TestJoinMachineRefusesLiveName: a machine name belongs to one daemon.
// Another joining under it is refused with the name and what to do while
// the first is live; it takes the name over once the first stopped, once
// its heartbeat is stale (a dead host), or at once when the first ran on
// the same host and its process is gone.
func TestJoinMachineRefusesLiveName(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	const stale = time.Minute
	alive := func(int) bool { return false }
	dead := func(int) bool { return true }
	join := func(host string, pid int, gone func(int) bool) error {
		return s.JoinMachine(ctx, Machine{Name: "bench-1", Class: "c", Host: host, PID: pid}, stale, gone)
	}
	holder := func() (string, int) {
		ms, err := s.Machines(ctx)
		if err != nil || len(ms) != 1 {
			t.Fatalf("machines %+v %v", ms, err)
		}
		return ms[0].Host, ms[0].PID
	}
	if err := join("host-a", 100, alive); err != nil {
		t.Fatal(err)
	}
	if err := join("host-a", 100, alive); err != nil {
		t.Errorf("the same daemon joining again: %v", err)
	}
	err := join("host-b", 200, dead)
	if !errors.Is(err, ErrMachineTaken) {
		t.Fatalf("a second host under a live name: %v, want ErrMachineTaken", err)
	}
	for _, want := range []string{`machine "bench-1" is live`, "pid 100 on host host-a", "--machine NAME"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if err := join("host-a", 101, alive); !errors.Is(err, ErrMachineTaken) {
		t.Errorf("a second live daemon on the same host: %v, want ErrMachineTaken", err)
	}
	if h, p := holder(); h != "host-a" || p != 100 {
		t.Errorf("refused joins changed the row: %s %d", h, p)
	}
	// The daemon of pid 100 crashed; one restarted on host-a takes over.
	if err := join("host-a", 102, dead); err != nil {
		t.Errorf("a restart on the same host after a crash: %v", err)
	}
	// host-a dies: its heartbeat grows stale, and host-b takes the name.
	if _, err := s.db.Exec(ctx, "UPDATE machines SET heartbeat_at = now() - interval '2 minutes'"); err != nil {
		t.Fatal(err)
	}
	if err := join("host-b", 200, alive); err != nil {
		t.Errorf("taking over a dead host's name: %v", err)
	}
	if h, p := holder(); h != "host-b" || p != 200 {
		t.Errorf("after the takeover: %s %d, want host-b 200", h, p)
	}
	// A daemon that stopped leaves its name free.
	if err := s.LeaveMachine(ctx, "bench-1"); err != nil {
		t.Fatal(err)
	}
	if err := join("host-c", 300, alive); err != nil {
		t.Errorf("joining under a stopped machine's name: %v", err)
	}
}
