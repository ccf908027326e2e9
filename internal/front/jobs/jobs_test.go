package jobs

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/app/nightly"
	"github.com/pgbisect/pgbisect/store/storetest"
)

func TestMachineName(t *testing.T) {
	for in, want := range map[string]string{
		"bench01":                  "bench01",
		"Bench_01.lab.example.org": "bench_01-lab-example-org",
		"--weird..Host--":          "weird-host",
		"":                         "machine",
		strings.Repeat("a", 70):    strings.Repeat("a", 64),
	} {
		got := MachineName(in)
		if got != want {
			t.Errorf("MachineName(%q) = %q, want %q", in, got, want)
		}
		if err := CheckClass(got); err != nil {
			t.Errorf("MachineName(%q) = %q breaks River's queue-name rules: %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "Bench", "bench 2core", "-x", "post", strings.Repeat("a", 65)} {
		if err := CheckClass(bad); err == nil {
			t.Errorf("class %q accepted", bad)
		}
	}
}

func TestTick(t *testing.T) {
	daily, err := nightly.ParseSchedule("0 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04:05", s, berlin)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for now, want := range map[string]string{
		"2026-03-10 02:00:00": "2026-03-10 02:00:00",
		"2026-03-10 02:00:07": "2026-03-10 02:00:00",
		"2026-03-10 01:59:59": "2026-03-09 02:00:00",
		"2026-03-10 23:00:00": "2026-03-10 02:00:00",
	} {
		if got := Tick(daily, at(now)); !got.Equal(at(want)) {
			t.Errorf("Tick(daily 02:00, %s) = %s, want %s", now, got.In(berlin), want)
		}
	}
	// "@every" is aligned to multiples of its period, the same on every
	// machine whenever it asks.
	ev, err := nightly.ParseSchedule("@every 6h", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	s := Aligned(ev)
	now := time.Date(2026, 3, 10, 13, 17, 0, 0, time.UTC)
	if got := Tick(s, now); !got.Equal(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("Tick(@every 6h, 13:17) = %s, want 12:00", got)
	}
	if got := s.Next(now); !got.Equal(time.Date(2026, 3, 10, 18, 0, 0, 0, time.UTC)) {
		t.Errorf("Next(@every 6h, 13:17) = %s, want 18:00", got)
	}
}

func TestPostBackoff(t *testing.T) {
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}
	for i, w := range want {
		if got := PostBackoff(i + 1); got != w {
			t.Errorf("PostBackoff(%d) = %s, want %s", i+1, got, w)
		}
	}
}

// TestNightlyJobUnique: the nightly job of one tick inserted twice (two
// leaders, or a leader's catch-up) is one row; the next tick's is another.
func TestNightlyJobUnique(t *testing.T) {
	st := storetest.Store(t)
	q, err := NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := nightly.ParseSchedule("@every 1h", "UTC")
	s := Aligned(ev)
	now := time.Date(2026, 3, 10, 13, 17, 0, 0, time.UTC)
	ctx := context.Background()
	var ids []int64
	for _, at := range []time.Time{now, now.Add(30 * time.Minute), now.Add(time.Hour)} {
		args, opts := NightlyJob(s, "uniq", at, app.NightlyRequest{Wait: true})
		res, err := q.client.Insert(ctx, args, opts)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	if ids[0] != ids[1] || ids[1] == ids[2] {
		t.Errorf("rows %v: want the first two (one tick) the same, the third (the next tick) another", ids)
	}
}

// TestReapedNightlyStaysOnePerTick: a nightly row whose machine died is
// moved to a continuation row, and a new leader's catch-up insert of the
// same tick finds the continuation instead of queueing the tick again (CI's
// soak run once ran a tick twice after its machine was killed).
func TestReapedNightlyStaysOnePerTick(t *testing.T) {
	st := storetest.Store(t)
	q, err := NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ev, err := nightly.ParseSchedule("@every 1h", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 11, 13, 17, 0, 0, time.UTC)
	args, opts := NightlyJob(Aligned(ev), "reaped", now, app.NightlyRequest{Wait: true})
	first, err := q.client.Insert(ctx, args, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1,
		attempted_at = now() - interval '1 hour', attempted_by = '{dead-machine}' WHERE id = $1`, first.Job.ID); err != nil {
		t.Fatal(err)
	}
	moved, err := Reap(ctx, st, q.client, time.Second)
	if err != nil || moved != 1 {
		t.Fatalf("Reap = %d, %v; want 1 job moved", moved, err)
	}
	var cont int64
	if err := st.Pool().QueryRow(ctx, `SELECT max(id) FROM river_job WHERE args->>'key' = $1`,
		args.(Args[app.NightlyRequest]).Key).Scan(&cont); err != nil || cont == first.Job.ID {
		t.Fatalf("no continuation row (%d, %v)", cont, err)
	}
	again, err := q.client.Insert(ctx, args, opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Job.ID != cont || !again.UniqueSkippedAsDuplicate {
		t.Errorf("the tick inserted again after the move: row %d (skipped %v), want the continuation %d",
			again.Job.ID, again.UniqueSkippedAsDuplicate, cont)
	}
	// The continuation's machine dies too: the next move keeps the key.
	if _, err := st.Pool().Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1,
		attempted_at = now() - interval '1 hour', attempted_by = '{dead-too}' WHERE id = $1`, cont); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE job_leases SET expires_at = now() - interval '1 minute' WHERE job_id = $1`,
		args.(Args[app.NightlyRequest]).Key); err != nil {
		t.Fatal(err)
	}
	if moved, err := Reap(ctx, st, q.client, time.Second); err != nil || moved != 1 {
		t.Fatalf("second Reap = %d, %v; want 1 job moved", moved, err)
	}
	third, err := q.client.Insert(ctx, args, opts)
	if err != nil {
		t.Fatal(err)
	}
	if third.Job.ID <= cont || !third.UniqueSkippedAsDuplicate {
		t.Errorf("after the second move the tick was queued again (row %d, skipped %v)", third.Job.ID, third.UniqueSkippedAsDuplicate)
	}
}

// TestMoveLegacyJobs: jobs queued or running in the queue of a pgbisect
// before River move into River once, with their requests, in order; done
// ones stay where they are; a second move finds nothing.
func TestMoveLegacyJobs(t *testing.T) {
	st := storetest.Store(t)
	ctx := context.Background()
	q, err := NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	typed, _ := json.Marshal(app.BisectRequest{Scenario: "/s/copy.yaml", Good: "A", Bad: "B", Metric: "copy_time"})
	id1, err := st.AddLegacyJob(ctx, "bisect", typed)
	if err != nil {
		t.Fatal(err)
	}
	id2, err := st.AddLegacyJob(ctx, "bisect", json.RawMessage(`{"argv": ["--resume", "abc"], "requester": "me@host"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, "UPDATE jobs SET status = 'running', worker = 'old' WHERE id = $1", id2); err != nil {
		t.Fatal(err)
	}
	done, _ := st.AddLegacyJob(ctx, "bisect", typed)
	if _, err := st.Pool().Exec(ctx, "UPDATE jobs SET status = 'done' WHERE id = $1", done); err != nil {
		t.Fatal(err)
	}
	n, err := q.MoveLegacyJobs(ctx, "legacy-class")
	if err != nil || n != 2 {
		t.Fatalf("moved %d, %v; want 2", n, err)
	}
	if n, err := q.MoveLegacyJobs(ctx, "legacy-class"); err != nil || n != 0 {
		t.Fatalf("second move: %d, %v; want nothing", n, err)
	}
	rows, err := st.Pool().Query(ctx, `SELECT j.id, r.kind, r.queue, r.args FROM jobs j JOIN river_job r ON r.id = j.river_id
		WHERE j.status = 'moved' ORDER BY j.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []Args[app.BisectRequest]
	var legacyIDs []int64
	for rows.Next() {
		var id int64
		var kind, queue string
		var raw json.RawMessage
		if err := rows.Scan(&id, &kind, &queue, &raw); err != nil {
			t.Fatal(err)
		}
		var a Args[app.BisectRequest]
		if err := json.Unmarshal(raw, &a); err != nil || kind != "bisect" || queue != "legacy-class" || a.Class != "legacy-class" {
			t.Fatalf("moved job %d: %s in %s: %s (%v)", id, kind, queue, raw, err)
		}
		got, legacyIDs = append(got, a), append(legacyIDs, id)
	}
	if len(got) != 2 || legacyIDs[0] != id1 || legacyIDs[1] != id2 {
		t.Fatalf("moved %v, want jobs %d and %d", legacyIDs, id1, id2)
	}
	if r := got[0].Request; r.Scenario != "/s/copy.yaml" || r.Metric != "copy_time" || got[0].Key != "legacy-"+jsonInt(id1) {
		t.Errorf("first moved job %+v", got[0])
	}
	if r := got[1].Request; r.Resume != "abc" || r.Requester != "me@host" {
		t.Errorf("the command-line job moved as %+v", got[1])
	}
	var status string
	if err := st.Pool().QueryRow(ctx, "SELECT status FROM jobs WHERE id = $1", done).Scan(&status); err != nil || status != "done" {
		t.Errorf("a finished old job: %q %v, want it left done", status, err)
	}
}

func jsonInt(i int64) string { b, _ := json.Marshal(i); return string(b) }

// TestJobKindsAreTheQueuedKinds: River runs a worker for each kind app's
// table queues, and for no other; each request becomes its kind's job,
// queued with the kind's policy, and a request the daemon does not run is
// refused with the list of those it does.
func TestJobKindsAreTheQueuedKinds(t *testing.T) {
	var got []string
	for _, k := range jobKinds {
		got = append(got, k.kind())
	}
	if want := app.QueuedKinds(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("job kinds %v, app queues %v: add or remove the line in jobKinds", got, want)
	}
	for _, r := range []app.Request{app.BisectRequest{Resume: "b"}, app.CompareRequest{}, app.NightlyRequest{}, app.DeliverRequest{}} {
		args, opts, err := NewArgs(r, "bench-2core")
		if err != nil || args.Kind() != r.Kind() {
			t.Fatalf("%s: %v %v", r.Kind(), args, err)
		}
		data, _ := json.Marshal(args)
		var back struct {
			Common
			Tick    time.Time       `json:"tick"`
			Request json.RawMessage `json:"request"`
		}
		if err := json.Unmarshal(data, &back); err != nil || back.Class != "bench-2core" || !strings.HasPrefix(back.Key, r.Kind()+"-") {
			t.Errorf("%s args %s: %v", r.Kind(), data, err)
		}
		if dec, _, err := app.DecodeRequest(args.Kind(), back.Request); err != nil || !reflect.DeepEqual(dec, r) {
			t.Errorf("%s: the request read back is %#v (%v), want %#v", r.Kind(), dec, err, r)
		}
		p, _ := app.QueuePolicy(r.Kind())
		if back.Tick.IsZero() == p.OnePerTick || (opts.Queue == PostQueue) != p.Posts || opts.MaxAttempts != p.Attempts ||
			opts.UniqueOpts.ByArgs != p.OnePerTick {
			t.Errorf("%s: args %s, options %+v; policy %+v", r.Kind(), data, opts, p)
		}
	}
	if _, _, err := NewArgs(app.RunRequest{}, ""); err == nil || !strings.Contains(err.Error(), "the daemon runs bisect, compare, nightly, deliver") {
		t.Errorf("a run request queued: %v", err)
	}
}
