package store

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// TestDashboardReads checks the dashboard's queries on an empty schema and
// after a few nights: the series keys count only each night's own commit,
// machines are listed with their samples, and the counts match.
func TestDashboardReads(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	if keys, err := s.SeriesKeys(ctx, ""); err != nil || len(keys) != 0 {
		t.Fatalf("empty SeriesKeys: %v %v", keys, err)
	}
	c, err := s.Counts(ctx)
	if err != nil || c.Samples != 0 || !c.LastNightly.IsZero() || len(c.Jobs) != len(JobStatuses) || c.Jobs["queued"] != 0 {
		t.Fatalf("empty Counts: %+v %v", c, err)
	}
	if _, err := s.NightlyRun(ctx, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("NightlyRun of nothing: %v", err)
	}
	env, err := s.Environment(ctx, []byte(`{"host": "h1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Environment(ctx, []byte(`{"host": "idle"}`)); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	var runs []NightlyRun
	for i, commit := range []string{"c1", "c2", "c3"} {
		r := NightlyRun{Branch: "master", Commit: commit, Status: "ok", Started: base.Add(time.Duration(i) * 24 * time.Hour)}
		if i < 2 {
			r.Finished = r.Started.Add(time.Hour)
		}
		if err := s.RecordNightly(ctx, &r); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
		// The night's own commit and the older build it was compared with.
		for _, c := range []string{commit, "base"} {
			if err := s.AddSamples(ctx, []Sample{
				{BuildKey: "k" + c, Commit: c, Scenario: "copy", Point: "clients=1", Metric: "tps", Value: 1, NightlyID: r.ID, EnvironmentID: env},
				{BuildKey: "k" + c, Commit: c, Scenario: "copy", Point: "clients=1", Metric: "tps", Value: 2, Index: 1, NightlyID: r.ID, EnvironmentID: env},
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.RecordBuild(ctx, Build{Key: "kc1", Commit: "c1", Status: "ok"}); err != nil {
		t.Fatal(err)
	}
	keys, err := s.SeriesKeys(ctx, "master")
	if err != nil || len(keys) != 1 || keys[0].Nights != 3 || !keys[0].Last.Equal(runs[2].Started) {
		t.Fatalf("SeriesKeys: %+v %v", keys, err)
	}
	if keys, _ := s.SeriesKeys(ctx, "other"); len(keys) != 0 {
		t.Errorf("SeriesKeys of another branch: %+v", keys)
	}
	got, err := s.NightlyRun(ctx, runs[1].ID)
	if err != nil || got.Commit != "c2" || got.Finished.IsZero() {
		t.Fatalf("NightlyRun: %+v %v", got, err)
	}
	list, err := s.NightlyRuns(ctx, 2)
	if err != nil || len(list) != 2 || list[0].ID != runs[2].ID || !list[0].Finished.IsZero() {
		t.Fatalf("NightlyRuns: %+v %v", list, err)
	}
	ms, err := s.EnvironmentsUsed(ctx)
	if err != nil || len(ms) != 2 || ms[0].EnvironmentID != env || ms[0].Samples != 12 || ms[1].Samples != 0 || !ms[1].Last.IsZero() {
		t.Fatalf("EnvironmentsUsed: %+v %v", ms, err)
	}
	c, err = s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Samples != 12 || c.Jobs == nil || c.Builds["ok"] != 1 || !c.LastNightly.Equal(runs[1].Started) {
		t.Errorf("Counts: %+v", c)
	}
}

// statusArgs is a job of TestCountsJobsByStatus; Outcome says what its
// worker does.
type statusArgs struct {
	Outcome string `json:"outcome"`
}

func (statusArgs) Kind() string { return "store_test_status" }

type statusWorker struct {
	river.WorkerDefaults[statusArgs]
	started chan struct{}
	release chan struct{}
}

func (w *statusWorker) Work(ctx context.Context, j *river.Job[statusArgs]) error {
	switch j.Args.Outcome {
	case "fail":
		return errors.New("failed on purpose")
	case "cancel":
		return river.JobCancel(errors.New("cancelled on purpose"))
	case "block":
		close(w.started)
		select {
		case <-w.release:
		case <-ctx.Done():
		}
	}
	return nil
}

// retryLater retries a failed job an hour later.
type retryLater struct{}

func (retryLater) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(time.Hour) }

// TestCountsJobsByStatus runs real River jobs on a store of its own into
// every state and checks the counts /metrics reports: River's states
// mapped to queued (available, scheduled, retryable), running, done,
// failed (discarded) and cancelled.
func TestCountsJobsByStatus(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := Open(ctx, Config{URL: testSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := &statusWorker{started: make(chan struct{}), release: make(chan struct{})}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(s.Pool()), &river.Config{
		Logger:      slog.New(slog.DiscardHandler),
		Queues:      map[string]river.QueueConfig{"work": {MaxWorkers: 5}},
		Workers:     workers,
		RetryPolicy: retryLater{}, // the retryable job stays retryable
	})
	if err != nil {
		t.Fatal(err)
	}
	ended, stop := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	defer stop()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(w.release)
		if err := client.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	insert := func(outcome string, opts river.InsertOpts) {
		t.Helper()
		if _, err := client.Insert(ctx, statusArgs{Outcome: outcome}, &opts); err != nil {
			t.Fatal(err)
		}
	}
	insert("ok", river.InsertOpts{Queue: "idle"})                                         // available
	insert("ok", river.InsertOpts{Queue: "work", ScheduledAt: time.Now().Add(time.Hour)}) // scheduled
	insert("fail", river.InsertOpts{Queue: "work", MaxAttempts: 2})                       // retryable
	insert("ok", river.InsertOpts{Queue: "work"})                                         // completed
	insert("fail", river.InsertOpts{Queue: "work", MaxAttempts: 1})                       // discarded
	insert("cancel", river.InsertOpts{Queue: "work"})                                     // cancelled
	insert("block", river.InsertOpts{Queue: "work"})                                      // running
	timeout := time.After(time.Minute)
	for n := 0; n < 4; n++ {
		select {
		case <-ended:
		case <-timeout:
			t.Fatalf("only %d of the 4 jobs that end ended within a minute", n)
		}
	}
	select {
	case <-w.started:
	case <-timeout:
		t.Fatal("the blocking job did not start within a minute")
	}
	c, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"queued": 3, "running": 1, "done": 1, "failed": 1, "cancelled": 1}
	if !maps.Equal(c.Jobs, want) {
		t.Errorf("Counts.Jobs = %v, want %v", c.Jobs, want)
	}
}
