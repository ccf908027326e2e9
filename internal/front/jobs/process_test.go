package jobs

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// jobRows are the River rows of key, oldest first: state and the machine
// that last attempted each.
func jobRows(t *testing.T, st *store.Store, key string) (states, machines []string) {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(), `SELECT state::text, coalesce(attempted_by[cardinality(attempted_by)], '')
		FROM river_job WHERE args->>'key' = $1 ORDER BY id`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s, m string
		if err := rows.Scan(&s, &m); err != nil {
			t.Fatal(err)
		}
		states, machines = append(states, s), append(machines, m)
	}
	return states, machines
}

func simSamples(t *testing.T, st *store.Store, id string) []store.Sample {
	t.Helper()
	ss, err := st.Samples(context.Background(), store.SampleQuery{BuildKey: "sim", Commit: id, Scenario: "sim", Metric: "m"})
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// checkSamples checks that samples 0..n-1 were each taken once.
func checkSamples(t *testing.T, ss []store.Sample, n int) {
	t.Helper()
	var idx []int
	for _, s := range ss {
		idx = append(idx, s.Index)
	}
	slices.Sort(idx)
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(idx, want) {
		t.Errorf("sample indexes %v, want each of 0..%d once (none lost, none duplicated)", idx, n-1)
	}
}

func leaseHolder(t *testing.T, st *store.Store, key string) string {
	ls, err := st.ActiveLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.JobID == key {
			return l.Machine
		}
	}
	return ""
}

func queueSim(t *testing.T, st *store.Store, id, class string, samples int) string {
	t.Helper()
	q, err := NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	job, err := q.Enqueue(context.Background(), app.BisectRequest{Resume: id, MaxSamples: samples}, class)
	if err != nil {
		t.Fatal(err)
	}
	var c Common
	if err := json.Unmarshal(job.EncodedArgs, &c); err != nil {
		t.Fatal(err)
	}
	return c.Key
}

// TestKillNineMidBisection: two workers of one class on one results
// database; the one running a bisection is killed with kill -9 part way.
// The other takes the job over when its lease expires and finishes it with
// the same culprit, every sample taken exactly once; the dead worker's row
// ends cancelled, the continuation completed.
func TestKillNineMidBisection(t *testing.T) {
	st := storetest.Store(t)
	const id, n = "sim-kill9", 14
	key := queueSim(t, st, id, "kill9", n)
	a := startChild(t, st, "kill9-a", "kill9")
	b := startChild(t, st, "kill9-b", "kill9")
	var holder string
	proctest.WaitUntil(t, time.Minute, "a worker takes the job", func() bool { holder = leaseHolder(t, st, key); return holder != "" })
	proctest.WaitUntil(t, time.Minute, "3 samples", func() bool { return len(simSamples(t, st, id)) >= 3 })
	victim, other := a, b
	if holder == b.Name {
		victim, other = b, a
	}
	victim.Kill(t)
	proctest.WaitUntil(t, 2*time.Minute, "the job completed on the other worker", func() bool {
		states, _ := jobRows(t, st, key)
		return len(states) > 0 && states[len(states)-1] == "completed"
	})
	states, machines := jobRows(t, st, key)
	if !slices.Equal(states, []string{"cancelled", "completed"}) || machines[0] != victim.Name || machines[1] != other.Name {
		t.Errorf("rows %v on %v, want cancelled on %s then completed on %s", states, machines, victim.Name, other.Name)
	}
	ss := simSamples(t, st, id)
	checkSamples(t, ss, n)
	var by = map[string]int{}
	for _, s := range ss {
		by[s.Machine]++
	}
	if by[victim.Name] < 3 || by[other.Name] == 0 || by[victim.Name]+by[other.Name] != n {
		t.Errorf("samples by machine %v: want the first from %s, the rest from %s", by, victim.Name, other.Name)
	}
	state, err := st.LoadBisection(context.Background(), id)
	if err != nil {
		t.Error(err)
	} else if state.Phase != bisect.PhaseDone || !strings.HasPrefix(state.Summary, "culprit c7 after") {
		t.Errorf("bisection %s %q, want done with culprit c7 (as without the kill)", state.Phase, state.Summary)
	}
	other.Stop(t)
}

// TestPausedWorkerWritesRefused: a worker paused with SIGSTOP until its
// lease expires loses the job to another; resumed, its next write is
// refused by the fence and it stops the job; no sample is duplicated.
func TestPausedWorkerWritesRefused(t *testing.T) {
	st := storetest.Store(t)
	const id, n = "sim-pause", 14
	key := queueSim(t, st, id, "pause", n)
	a := startChild(t, st, "pause-a", "pause")
	proctest.WaitUntil(t, time.Minute, "pause-a takes the job", func() bool { return leaseHolder(t, st, key) == "pause-a" })
	proctest.WaitUntil(t, time.Minute, "2 samples", func() bool { return len(simSamples(t, st, id)) >= 2 })
	a.Signal(t, syscall.SIGSTOP)
	b := startChild(t, st, "pause-b", "pause")
	proctest.WaitUntil(t, 2*time.Minute, "pause-b takes the job over", func() bool { return leaseHolder(t, st, key) == "pause-b" })
	a.Signal(t, syscall.SIGCONT)
	proctest.WaitUntil(t, time.Minute, "pause-a says its write was refused or its lease lost", func() bool {
		return strings.Contains(a.Output(), "write refused") || strings.Contains(a.Output(), `result="lease lost"`)
	})
	proctest.WaitUntil(t, 2*time.Minute, "the job completed", func() bool {
		states, _ := jobRows(t, st, key)
		return len(states) > 0 && states[len(states)-1] == "completed"
	})
	checkSamples(t, simSamples(t, st, id), n)
	if !strings.Contains(a.Output(), "write refused") {
		t.Errorf("pause-a wrote no sample after resuming (its lease loss was noticed first); want a refused write:\n%s", a.Output())
	}
	a.Stop(t)
	b.Stop(t)
}

// TestNightlyOncePerTick: two daemons of one class, both scheduling the
// nightly pass of two classes every 2 seconds, give one job per tick per
// class, also across a change of leader (one is stopped, a third joins),
// and the class they work runs each once.
func TestNightlyOncePerTick(t *testing.T) {
	st := storetest.Store(t)
	env := []string{"PGBISECT_NIGHTLY=@every 2s", "PGBISECT_NIGHTLY_CLASSES=night-a night-b"}
	a := startChild(t, st, "night-1", "night-a", env...)
	b := startChild(t, st, "night-2", "night-a", env...)
	ticks := func(class string) map[string]int {
		rows, err := st.Pool().Query(context.Background(), `SELECT args->>'tick', count(*) FROM river_job
			WHERE kind = 'nightly' AND queue = $1 GROUP BY 1`, class)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]int{}
		for rows.Next() {
			var tick string
			var n int
			if err := rows.Scan(&tick, &n); err != nil {
				t.Fatal(err)
			}
			m[tick] = n
		}
		return m
	}
	proctest.WaitUntil(t, 2*time.Minute, "2 ticks of night-a", func() bool { return len(ticks("night-a")) >= 2 })
	// A change of leader: a new leader enqueues the current tick at once
	// (RunOnStart), which the unique arguments drop when it is queued.
	a.Stop(t)
	c := startChild(t, st, "night-3", "night-a", env...)
	proctest.WaitUntil(t, 2*time.Minute, "5 ticks of night-a", func() bool { return len(ticks("night-a")) >= 5 })
	b.Stop(t)
	c.Stop(t)
	for _, class := range []string{"night-a", "night-b"} {
		for tick, n := range ticks(class) {
			if n != 1 {
				t.Errorf("class %s, tick %s: %d jobs, want 1", class, tick, n)
			}
		}
	}
	if len(ticks("night-b")) == 0 {
		t.Error("no nightly job of night-b: every daemon enqueues every class's")
	}
	var completed int
	if err := st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'nightly' AND queue = 'night-a' AND state = 'completed'`).Scan(&completed); err != nil {
		t.Fatal(err)
	}
	evs, err := st.Events(context.Background(), "sim-nightly", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if completed == 0 || len(evs) != completed {
		t.Errorf("%d passes ran for %d completed nightly jobs of night-a, want one each", len(evs), completed)
	}
}

// TestPostSurvivesCrash: a queued post whose worker is killed with kill -9
// before it posts is posted by another worker, exactly once.
func TestPostSurvivesCrash(t *testing.T) {
	st := storetest.Store(t)
	var posts atomic.Int32
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/repos/o/r/issues" {
			posts.Add(1)
			w.WriteHeader(http.StatusCreated)
			return
		}
		http.NotFound(w, r)
	}))
	defer gh.Close()
	q, err := NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	job, err := q.Enqueue(context.Background(), app.DeliverRequest{}, "posters")
	if err != nil {
		t.Fatal(err)
	}
	var c Common
	_ = json.Unmarshal(job.EncodedArgs, &c)
	a := startChild(t, st, "post-a", "posters", "PGBISECT_FAKE_GITHUB="+gh.URL)
	proctest.WaitUntil(t, time.Minute, "post-a takes the post", func() bool { return leaseHolder(t, st, c.Key) == "post-a" })
	a.Kill(t)
	b := startChild(t, st, "post-b", "posters", "PGBISECT_FAKE_GITHUB="+gh.URL)
	proctest.WaitUntil(t, 2*time.Minute, "the post completed", func() bool {
		states, _ := jobRows(t, st, c.Key)
		return len(states) > 0 && states[len(states)-1] == "completed"
	})
	if n := posts.Load(); n != 1 {
		t.Errorf("%d posts, want 1", n)
	}
	b.Stop(t)
}

// TestSIGTERMSnoozes: SIGTERM stops a worker cleanly mid-job: the job is
// snoozed, not counted as a failed attempt, its lease released, and a
// restarted worker resumes it without a lost or duplicated sample.
func TestSIGTERMSnoozes(t *testing.T) {
	st := storetest.Store(t)
	const id, n = "sim-term", 10
	key := queueSim(t, st, id, "term", n)
	a := startChild(t, st, "term-a", "term")
	proctest.WaitUntil(t, time.Minute, "3 samples", func() bool { return len(simSamples(t, st, id)) >= 3 })
	a.Stop(t)
	var attempt int
	var errs int
	if err := st.Pool().QueryRow(context.Background(), `SELECT attempt, coalesce(cardinality(errors), 0) FROM river_job WHERE args->>'key' = $1`, key).Scan(&attempt, &errs); err != nil {
		t.Fatal(err)
	}
	if attempt != 0 || errs != 0 {
		t.Errorf("after SIGTERM: attempt %d with %d errors, want 0 and 0 (snoozed, not failed)", attempt, errs)
	}
	if !strings.Contains(a.Output(), `result=interrupted`) || !strings.Contains(a.Output(), "daemon stopped") {
		t.Errorf("term-a's log lacks the interrupted job and its stop:\n%s", a.Output())
	}
	b := startChild(t, st, "term-b", "term")
	proctest.WaitUntil(t, time.Minute, "the job completed", func() bool {
		states, _ := jobRows(t, st, key)
		return len(states) == 1 && states[0] == "completed"
	})
	checkSamples(t, simSamples(t, st, id), n)
	b.Stop(t)
}

// TestDuplicateMachineRefused: a daemon joining under the name of a live
// machine (another process) exits with an error naming the machine and
// --machine; once that machine is killed with kill -9 on this host, a
// daemon restarted under its name takes it over.
func TestDuplicateMachineRefused(t *testing.T) {
	st := storetest.Store(t)
	a := startChild(t, st, "dup-1", "dup")
	proctest.WaitUntil(t, time.Minute, "dup-1 started", func() bool { return strings.Contains(a.Output(), "daemon started") })
	b := startChild(t, st, "dup-1", "dup")
	<-b.Done()
	if code := b.Cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(b.Output(), `machine "dup-1" is live`) ||
		!strings.Contains(b.Output(), "--machine NAME") {
		t.Fatalf("second daemon named dup-1 exited %d:\n%s", code, b.Output())
	}
	a.Kill(t)
	c := startChild(t, st, "dup-1", "dup")
	proctest.WaitUntil(t, time.Minute, "a restarted dup-1 started", func() bool { return strings.Contains(c.Output(), "daemon started") })
	c.Stop(t)
}

// TestLeaseExpiredUnrenewedHandedBack: a worker's lease expires unrenewed,
// as when the results store is away for longer than the TTL, and no other
// machine takes the job. The worker hands the job back to the queue
// (snoozed) and runs it again to the end: it is not cancelled, which lost
// it (the reaper moves only running rows). Found by the soak run (issue
// 33), where a compare job ended cancelled after a store restart.
func TestLeaseExpiredUnrenewedHandedBack(t *testing.T) {
	st := storetest.Store(t)
	const id, n = "sim-expire", 10
	key := queueSim(t, st, id, "expire", n)
	a := startChild(t, st, "expire-a", "expire")
	proctest.WaitUntil(t, time.Minute, "expire-a takes the job", func() bool { return leaseHolder(t, st, key) == "expire-a" })
	proctest.WaitUntil(t, time.Minute, "2 samples", func() bool { return len(simSamples(t, st, id)) >= 2 })
	if _, err := st.Pool().Exec(context.Background(), "UPDATE job_leases SET expires_at = now() - interval '1 second' WHERE job_id = $1", key); err != nil {
		t.Fatal(err)
	}
	proctest.WaitUntil(t, 2*time.Minute, "the job completed", func() bool {
		states, _ := jobRows(t, st, key)
		return len(states) > 0 && states[len(states)-1] == "completed"
	}, a)
	if states, _ := jobRows(t, st, key); !slices.Equal(states, []string{"completed"}) {
		t.Errorf("rows %v, want the one row completed", states)
	}
	if !strings.Contains(a.Output(), "lease expired, handed back") {
		t.Errorf("expire-a does not say it handed the job back:\n%s", a.Tail(20))
	}
	checkSamples(t, simSamples(t, st, id), n)
	a.Stop(t)
}
