package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAppendAndReadEvents(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	for _, bad := range []struct {
		job, kind, payload string
	}{{"", "build", ""}, {"j", "", ""}, {"j", "build", "{nope"}} {
		if _, err := s.AppendEvent(ctx, bad.job, bad.kind, json.RawMessage(bad.payload)); err == nil {
			t.Errorf("AppendEvent(%q, %q, %q) was accepted", bad.job, bad.kind, bad.payload)
		}
	}
	for i, e := range []struct {
		job, kind, payload string
		want               int64
	}{
		{"job-1", "build-started", `{"commit": "abc"}`, 1},
		{"job-2", "build-started", ``, 1},
		{"job-1", "sample", `{"value": 1.5}`, 2},
		{"job-1", "done", `{}`, 3},
	} {
		seq, err := s.AppendEvent(ctx, e.job, e.kind, json.RawMessage(e.payload))
		if err != nil {
			t.Fatal(err)
		}
		if seq != e.want {
			t.Errorf("append %d (%s to %s): seq %d, want %d", i, e.kind, e.job, seq, e.want)
		}
	}
	all, err := s.Events(ctx, "job-1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(all); !slices.Equal(got, []string{"1 build-started", "2 sample", "3 done"}) {
		t.Fatalf("events of job-1: %v", got)
	}
	var p struct{ Value float64 }
	if err := json.Unmarshal(all[1].Payload, &p); err != nil || p.Value != 1.5 || all[1].JobID != "job-1" || all[1].At.IsZero() {
		t.Errorf("event 2: %+v (payload %s)", all[1], all[1].Payload)
	}
	page, err := s.Events(ctx, "job-1", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(page); !slices.Equal(got, []string{"2 sample"}) {
		t.Errorf("events of job-1 after 1, limit 1: %v", got)
	}
	other, err := s.Events(ctx, "job-2", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(other) != 1 || string(other[0].Payload) != "{}" {
		t.Errorf("events of job-2: %+v, want one with payload {}", other)
	}
	if none, err := s.Events(ctx, "job-3", 0, 0); err != nil || len(none) != 0 {
		t.Errorf("events of an unknown job: %v, %v", none, err)
	}
	if err := s.FollowEvents(ctx, "job-1", 0, func(Event) error { return nil }); err == nil {
		t.Error("FollowEvents on a store bound to a transaction did not fail")
	}
}

// kinds describes events as "seq kind", for comparisons.
func kinds(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%d %s", e.Seq, e.Kind))
	}
	return out
}

// openSchema opens a store with its own pool on a schema of its own, and a
// second store (another pool, as another process would have) on the same
// schema.
func openSchema(t *testing.T) (a, b *Store, url string) {
	t.Helper()
	ctx := context.Background()
	url = testSchema(t)
	var err error
	if a, err = Open(ctx, Config{URL: url, Log: testLog()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if b, err = Open(ctx, Config{URL: url, Log: testLog()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return a, b, url
}

// TestAppendEventConcurrently has goroutines on two pools append to one
// job at once: the numbers must be 1..n without gaps or repeats, and each
// goroutine's events must appear in the order it appended them.
func TestAppendEventConcurrently(t *testing.T) {
	ctx := context.Background()
	a, b, _ := openSchema(t)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if w%2 == 1 {
				s = b
			}
			for i := range each {
				if _, err := s.AppendEvent(ctx, "race", "step", json.RawMessage(fmt.Sprintf(`{"w": %d, "i": %d}`, w, i))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	evs, err := a.Events(ctx, "race", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != writers*each {
		t.Fatalf("%d events, want %d", len(evs), writers*each)
	}
	next := make([]int, writers)
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: want 1..%d without gaps", i, e.Seq, len(evs))
		}
		var p struct{ W, I int }
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.I != next[p.W] {
			t.Fatalf("seq %d: writer %d's event %d, want its event %d (sequence order differs from append order)", e.Seq, p.W, p.I, next[p.W])
		}
		next[p.W]++
	}
}

// recv waits for the next event a follower delivered on ch.
func recv(t *testing.T, ctx context.Context, ch <-chan Event) Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-ctx.Done():
		t.Fatal("no event delivered before the test's deadline")
		return Event{}
	}
}

// TestFollowEvents follows a job from one store while another appends: the
// follower starts after a given seq, gets new events through NOTIFY alone
// (its re-read period is an hour), skips other jobs' events, and stops when
// its callback says so.
func TestFollowEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	follower, appender, _ := openSchema(t)
	follower.followPoll = time.Hour
	for _, k := range []string{"build-started", "build-finished", "sample"} {
		if _, err := appender.AppendEvent(ctx, "job", k, nil); err != nil {
			t.Fatal(err)
		}
	}
	ch := make(chan Event)
	done := make(chan error, 1)
	go func() {
		done <- follower.FollowEvents(ctx, "job", 1, func(e Event) error {
			ch <- e
			if e.Kind == "done" {
				return ErrStopFollowing
			}
			return nil
		})
	}()
	var got []Event
	for range 2 {
		got = append(got, recv(t, ctx, ch))
	}
	// The follower has read everything there was, and listens: what follows
	// reaches it by notification.
	for _, e := range []struct{ job, kind string }{{"other", "sample"}, {"job", "verdict"}, {"other", "done"}, {"job", "culprit"}, {"job", "done"}} {
		if _, err := appender.AppendEvent(ctx, e.job, e.kind, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		got = append(got, recv(t, ctx, ch))
	}
	if err := <-done; err != nil {
		t.Fatalf("FollowEvents: %v, want nil after ErrStopFollowing", err)
	}
	want := []string{"2 build-finished", "3 sample", "4 verdict", "5 culprit", "6 done"}
	if k := kinds(got); !slices.Equal(k, want) {
		t.Fatalf("followed %v, want %v", k, want)
	}
}

func TestFollowEventsStops(t *testing.T) {
	ctx := context.Background()
	follower, appender, _ := openSchema(t)
	follower.followPoll = time.Hour
	if _, err := appender.AppendEvent(ctx, "job", "build-started", nil); err != nil {
		t.Fatal(err)
	}
	// On cancel, while waiting for the next event.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := make(chan Event, 1)
	done := make(chan error, 1)
	go func() {
		done <- follower.FollowEvents(fctx, "job", 0, func(e Event) error { seen <- e; return nil })
	}()
	if e := <-seen; e.Seq != 1 {
		t.Fatalf("first event %+v", e)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("FollowEvents after cancel: %v, want context.Canceled", err)
	}
	// On the callback's own error, which comes back as it is.
	boom := errors.New("boom")
	if err := follower.FollowEvents(ctx, "job", 0, func(Event) error { return boom }); err != boom {
		t.Fatalf("FollowEvents with a failing callback: %v, want boom", err)
	}
	// The follower's connections went back or were closed: the pool still works.
	if _, err := follower.AppendEvent(ctx, "job", "sample", nil); err != nil {
		t.Fatal(err)
	}
}

// TestFollowEventsRereads checks the fallback: an event committed without
// a notification, after the follower has read the job, is still delivered,
// by the periodic re-read.
func TestFollowEventsRereads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	follower, appender, _ := openSchema(t)
	follower.followPoll = 20 * time.Millisecond
	// Events inserted as AppendEvent does, but without pg_notify.
	unannounced := func(seq int64, kind string) {
		t.Helper()
		if _, err := appender.pool.Exec(ctx, `INSERT INTO job_event_seqs (job_id, last_seq) VALUES ('job', $1)
			ON CONFLICT (job_id) DO UPDATE SET last_seq = $1`, seq); err != nil {
			t.Fatal(err)
		}
		if _, err := appender.pool.Exec(ctx, "INSERT INTO job_events (job_id, seq, kind) VALUES ('job', $1, $2)", seq, kind); err != nil {
			t.Fatal(err)
		}
	}
	unannounced(1, "build-started")
	ch := make(chan Event)
	done := make(chan error, 1)
	go func() {
		done <- follower.FollowEvents(ctx, "job", 0, func(e Event) error {
			ch <- e
			if e.Seq == 2 {
				return ErrStopFollowing
			}
			return nil
		})
	}()
	// Once the first event is delivered, the read that found it is over:
	// only a re-read can find the second.
	if e := recv(t, ctx, ch); e.Seq != 1 {
		t.Fatalf("got %+v, want seq 1", e)
	}
	unannounced(2, "build-finished")
	if e := recv(t, ctx, ch); e.Seq != 2 || e.Kind != "build-finished" {
		t.Fatalf("got %+v, want seq 2", e)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The second process of TestFollowEventsFromAnotherProcess is this test
// binary run again with these variables set; TestMain sends it to
// followerMain instead of the tests.
const (
	followDBEnv    = "PGBISECT_TEST_FOLLOW_DB"
	followJobEnv   = "PGBISECT_TEST_FOLLOW_JOB"
	followAfterEnv = "PGBISECT_TEST_FOLLOW_AFTER"
)

// followerMain follows a job's events in the database named by the
// environment and prints each as "seq kind payload", until the "done"
// event. It re-reads only hourly, so new events reach it by notification.
func followerMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	after, err := strconv.ParseInt(os.Getenv(followAfterEnv), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := Open(ctx, Config{URL: os.Getenv(followDBEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	s.followPoll = time.Hour
	err = s.FollowEvents(ctx, os.Getenv(followJobEnv), after, func(e Event) error {
		fmt.Printf("%d %s %s\n", e.Seq, e.Kind, e.Payload)
		if e.Kind == "done" {
			return ErrStopFollowing
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestFollowEventsFromAnotherProcess runs a follower in a second OS
// process: it picks up a running job after the seq it is given, sees the
// events this process appends while it follows, in order, and stops at
// the job's end.
func TestFollowEventsFromAnotherProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, _, url := openSchema(t)
	add := func(kind, payload string) {
		t.Helper()
		if _, err := s.AppendEvent(ctx, "bisect-42", kind, json.RawMessage(payload)); err != nil {
			t.Fatal(err)
		}
	}
	add("build-started", `{"commit": "aaa"}`)
	add("build-finished", `{"commit": "aaa"}`)
	add("sample", `{"commit": "aaa", "value": 1}`)

	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), followDBEnv+"="+url, followJobEnv+"=bisect-42", followAfterEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var got []string
	next := func() {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the follower ended early (%v); it printed %q; stderr:\n%s", cmd.Wait(), got, stderr.String())
			}
			got = append(got, l)
		case <-ctx.Done():
			t.Fatalf("the follower printed %q and nothing more before the deadline; stderr:\n%s", got, stderr.String())
		}
	}
	next()
	next()
	// The follower has caught up and listens; the job goes on.
	add("verdict", `{"commit": "aaa", "verdict": "bad"}`)
	add("culprit", `{"commit": "aaa"}`)
	add("done", `{}`)
	for range 3 {
		next()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("follower: %v; stderr:\n%s", err, stderr.String())
	}
	want := []string{
		`2 build-finished {"commit": "aaa"}`,
		`3 sample {"value": 1, "commit": "aaa"}`,
		`4 verdict {"commit": "aaa", "verdict": "bad"}`,
		`5 culprit {"commit": "aaa"}`,
		`6 done {}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the follower printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
