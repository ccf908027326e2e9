package nightly

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/store"
)

// memQueue is an in-memory Queue with the store's claim rules, for the
// daemon's own logic; daemon_signal_test drives the real store.
type memQueue struct {
	mu   sync.Mutex
	jobs []*memJob
}

type memJob struct {
	store.Job
	status, worker, err, progress string
}

func (q *memQueue) add(kind string) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	id := int64(len(q.jobs) + 1)
	q.jobs = append(q.jobs, &memJob{Job: store.Job{ID: id, Kind: kind}, status: "queued"})
	return id
}

func (q *memQueue) Claim(_ context.Context, worker string, kinds ...string) (*store.Job, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, j := range q.jobs {
		if j.status == "queued" {
			j.status, j.worker = "running", worker
			j.Attempts++
			c := j.Job
			return &c, nil
		}
	}
	return nil, nil
}

func (q *memQueue) Requeue(_ context.Context, worker string) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, j := range q.jobs {
		if j.status == "running" && j.worker == worker {
			j.status = "queued"
			n++
		}
	}
	return n, nil
}

func (q *memQueue) Finish(_ context.Context, id int64, jobErr error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	j := q.jobs[id-1]
	j.status = "done"
	if jobErr != nil {
		j.status, j.err = "failed", jobErr.Error()
	}
	return nil
}

func (q *memQueue) SetProgress(_ context.Context, id int64, text string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.jobs[id-1].progress = text
	return nil
}

func (q *memQueue) get(id int64) memJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	return *q.jobs[id-1]
}

// everySecond fires at each whole second, like "@every 1s" but aligned.
type everySecond struct{}

func (everySecond) Next(t time.Time) time.Time { return t.Truncate(time.Second).Add(time.Second) }

func TestDaemonRunsScheduleAndQueue(t *testing.T) {
	dir := t.TempDir()
	q := &memQueue{}
	failing := q.add("fail")
	panicking := q.add("panic")
	good := q.add("ok")

	nightlies := make(chan struct{}, 10)
	jobsDone := make(chan int64, 10)
	var logBuf syncBuffer
	d := &Daemon{
		StateDir: dir,
		Worker:   "test",
		Schedule: everySecond{},
		Nightly: func(ctx context.Context, progress func(string)) error {
			// Runs under the machine lock, like every job.
			if h, held, _ := MachineHolder(dir); !held || h.PID != os.Getpid() {
				t.Errorf("nightly runs without the machine lock (holder %+v)", h)
			}
			nightlies <- struct{}{}
			return nil
		},
		Queue: q,
		RunJob: func(ctx context.Context, job store.Job, progress func(string)) error {
			defer func() { jobsDone <- job.ID }()
			progress("step 1 of 1")
			switch job.Kind {
			case "fail":
				return errors.New("the build failed")
			case "panic":
				var m map[string]int
				m["x"] = 1
			}
			return nil
		},
		Poll: time.Hour, // the queue is looked at when idle after each job and on Wake
		Log:  slog.New(slog.NewTextHandler(&logBuf, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-jobsDone
	}
	<-nightlies
	<-nightlies // the schedule keeps firing after failed jobs

	if j := q.get(failing); j.status != "failed" || j.err != "the build failed" {
		t.Errorf("failing job: status %q err %q", j.status, j.err)
	}
	if j := q.get(panicking); j.status != "failed" || !strings.Contains(j.err, "panic") {
		t.Errorf("panicking job: status %q err %q", j.status, j.err)
	}
	if j := q.get(good); j.status != "done" || j.progress != "step 1 of 1" {
		t.Errorf("good job: status %q progress %q", j.status, j.progress)
	}

	// A request queued while the daemon idles is taken on Wake.
	late := q.add("ok")
	d.Wake()
	if id := <-jobsDone; id != late {
		t.Fatalf("ran job %d, want %d", id, late)
	}

	// A second daemon on the same state directory is refused.
	d2 := &Daemon{StateDir: dir}
	if err := d2.Start(ctx); err == nil || !strings.Contains(err.Error(), "another daemon") {
		t.Fatalf("second daemon: %v, want a refusal", err)
	}

	cancel()
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	st, running, err := ReadStatus(dir)
	if err != nil || running || st.Stopped.IsZero() || st.Last == nil {
		t.Fatalf("status after stop: %+v running=%v err=%v", st, running, err)
	}
	log := logBuf.String()
	for _, want := range []string{`kind=fail`, `result=failed`, `err="the build failed"`, `kind=nightly`, `result=ok`, "daemon stopped"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// A nightly pass that is due but unfinished when the daemon stops runs as
// soon as the next daemon starts, schedule or not.
func TestDaemonResumesInterruptedNightly(t *testing.T) {
	dir := t.TempDir()
	started := make(chan struct{})
	d := &Daemon{
		StateDir: dir,
		Schedule: everySecond{},
		Nightly: func(ctx context.Context, progress func(string)) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-started
	st, running, err := ReadStatus(dir)
	if err != nil || !running || st.Current == nil || st.Current.Kind != "nightly" {
		t.Fatalf("status during the pass: %+v running=%v err=%v", st, running, err)
	}
	cancel()
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, PendingFile)); err != nil {
		t.Fatalf("interrupted pass left no marker: %v", err)
	}

	ran := make(chan struct{})
	d = &Daemon{
		StateDir: dir,
		Schedule: neverSchedule{},
		Nightly: func(ctx context.Context, progress func(string)) error {
			close(ran)
			return nil
		},
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-ran
	cancel()
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, PendingFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("finished pass left its marker: %v", err)
	}
}

type neverSchedule struct{}

func (neverSchedule) Next(t time.Time) time.Time { return t.AddDate(100, 0, 0) }

func TestParseSchedule(t *testing.T) {
	from := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		spec, tz string
		want     time.Time
	}{
		{"0 2 * * *", "", time.Date(2026, 3, 29, 2, 0, 0, 0, time.UTC)},
		// Berlin moves to summer time on 2026-03-29: 04:30 that day is
		// CEST, 02:30 UTC (03:30 UTC the day before).
		{"30 4 * * *", "Europe/Berlin", time.Date(2026, 3, 29, 2, 30, 0, 0, time.UTC)},
		{"CRON_TZ=America/New_York 0 2 * * *", "Europe/Berlin", time.Date(2026, 3, 29, 6, 0, 0, 0, time.UTC)},
		{"@every 6h", "", from.Add(6 * time.Hour)},
	} {
		s, err := ParseSchedule(c.spec, c.tz)
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		if got := s.Next(from); !got.Equal(c.want) {
			t.Errorf("%q in %q: next %v, want %v", c.spec, c.tz, got.UTC(), c.want)
		}
	}
	for _, bad := range []string{"", "0 2 * *", "61 * * * *"} {
		if _, err := ParseSchedule(bad, "UTC"); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := ParseSchedule("0 2 * * *", "Mars/Olympus"); err == nil {
		t.Error("unknown time zone accepted")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
