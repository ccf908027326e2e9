package store

import (
	"context"
	"errors"
	"testing"
	"time"
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
	if err != nil || c.Samples != 0 || !c.LastNightly.IsZero() || len(c.Jobs) != 0 {
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
