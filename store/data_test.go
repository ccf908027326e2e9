package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

func TestBuilds(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	if _, err := s.Build(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing build: got %v, want ErrNotFound", err)
	}
	b := Build{Key: "abc-opts1", Commit: "abc", Options: json.RawMessage(`{"cflags": "-O2"}`), Status: "failed",
		LogPath: "/logs/abc.log", Duration: 95500 * time.Millisecond, Error: "make: *** [all] Error 2"}
	if err := s.RecordBuild(ctx, b); err != nil {
		t.Fatal(err)
	}
	// A rebuild of the same key replaces the record.
	b.Status, b.Error, b.Duration = "ok", "", 12*time.Second
	if err := s.RecordBuild(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := s.Build(ctx, b.Key)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "ok" || got.Error != "" || got.Duration != 12*time.Second || got.LogPath != b.LogPath || got.Commit != "abc" {
		t.Fatalf("got %+v", got)
	}
	var opts map[string]string
	if err := json.Unmarshal(got.Options, &opts); err != nil || opts["cflags"] != "-O2" {
		t.Fatalf("options %s", got.Options)
	}
	if err := s.RecordBuild(ctx, Build{Key: "x"}); err == nil {
		t.Fatal("a build without commit and status was accepted")
	}
}

func TestEnvironmentDeduplicates(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	a, err := s.Environment(ctx, json.RawMessage(`{"kernel": "6.1", "cpus": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Environment(ctx, json.RawMessage(`{"cpus":2,"kernel":"6.1"}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Environment(ctx, json.RawMessage(`{"cpus":4,"kernel":"6.1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a == c {
		t.Fatalf("ids %d %d %d: want the first two equal (same JSON, other key order) and the third different", a, b, c)
	}
	info, err := s.EnvironmentInfo(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(info, &m); err != nil || m["cpus"] != 4.0 {
		t.Fatalf("info %s", info)
	}
}

func TestSamples(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	env, err := s.Environment(ctx, json.RawMessage(`{"host":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	var in []Sample
	for i := range 3 {
		for _, p := range []string{"clients=1", "clients=4"} {
			in = append(in, Sample{BuildKey: "k1", Commit: "c1", Scenario: "copy", Point: p, Metric: "tps",
				Value: float64(100 + i), Index: i, Time: t0.Add(time.Duration(i) * time.Minute), EnvironmentID: env})
		}
	}
	in = append(in, Sample{BuildKey: "k2", Commit: "c2", Scenario: "copy", Metric: "elapsed", Value: math.Pi, Index: 0})
	if err := s.AddSamples(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSample(ctx, Sample{BuildKey: "k2", Commit: "c2", Scenario: "copy", Metric: "elapsed", Value: 2, Index: 1,
		BisectionID: "b1"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    SampleQuery
		want []float64
	}{
		{SampleQuery{BuildKey: "k1", Scenario: "copy", Point: "clients=4", Metric: "tps"}, []float64{100, 101, 102}},
		{SampleQuery{BuildKey: "k1", AnyPoint: true}, []float64{100, 100, 101, 101, 102, 102}},
		{SampleQuery{Commit: "c2", Metric: "elapsed"}, []float64{math.Pi, 2}},
		{SampleQuery{Commit: "c2", Point: "clients=1"}, nil},
		{SampleQuery{Scenario: "other", AnyPoint: true}, nil},
		{SampleQuery{BisectionID: "b1", AnyPoint: true}, []float64{2}},
		{SampleQuery{BisectionID: "b2", AnyPoint: true}, nil},
	} {
		got, err := s.Samples(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var vals []float64
		for _, sm := range got {
			vals = append(vals, sm.Value)
		}
		if !slices.Equal(vals, tc.want) {
			t.Errorf("Samples(%+v) = %v, want %v", tc.q, vals, tc.want)
		}
	}
	got, err := s.Samples(ctx, SampleQuery{BuildKey: "k1", Point: "clients=1", Metric: "tps"})
	if err != nil {
		t.Fatal(err)
	}
	last := got[2]
	if last.EnvironmentID != env || last.Index != 2 || !last.Time.Equal(t0.Add(2*time.Minute)) || last.NightlyID != 0 {
		t.Errorf("round trip: %+v", last)
	}
	if err := s.AddSamples(ctx, []Sample{{BuildKey: "k", Commit: "c", Scenario: "s", Metric: "m"}, {BuildKey: "k"}}); err == nil {
		t.Error("an incomplete sample was accepted")
	}
}

// TestSeries: each night contributes the samples of its own commit, not
// those of the older build measured alongside it, in night order.
func TestSeries(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	t0 := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	commits := []string{"c1", "c2", "c3"}
	for night, c := range commits {
		r := &NightlyRun{Branch: "master", Commit: c, Status: "ok", Started: t0.Add(time.Duration(night) * 24 * time.Hour)}
		if err := s.RecordNightly(ctx, r); err != nil {
			t.Fatal(err)
		}
		var samples []Sample
		for i := range 2 {
			samples = append(samples, Sample{BuildKey: c + "-k", Commit: c, Scenario: "copy", Metric: "tps",
				Value: float64(10*(night+1) + i), Index: i, NightlyID: r.ID})
			if night > 0 { // the previous night's build, measured again
				prev := commits[night-1]
				samples = append(samples, Sample{BuildKey: prev + "-k", Commit: prev, Scenario: "copy", Metric: "tps",
					Value: -1, Index: i, NightlyID: r.ID})
			}
		}
		if err := s.AddSamples(ctx, samples); err != nil {
			t.Fatal(err)
		}
	}
	other := &NightlyRun{Branch: "REL_17_STABLE", Commit: "x", Status: "ok"}
	if err := s.RecordNightly(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSample(ctx, Sample{BuildKey: "x-k", Commit: "x", Scenario: "copy", Metric: "tps", Value: 99, NightlyID: other.ID}); err != nil {
		t.Fatal(err)
	}

	got, err := s.Series(ctx, "master", "copy", "tps", "")
	if err != nil {
		t.Fatal(err)
	}
	var desc []string
	for _, p := range got {
		desc = append(desc, fmt.Sprintf("%s%v", p.Commit, p.Values))
	}
	want := []string{"c1[10 11]", "c2[20 21]", "c3[30 31]"}
	if !slices.Equal(desc, want) {
		t.Fatalf("Series = %v, want %v", desc, want)
	}
	all, err := s.Series(ctx, "", "copy", "tps", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Fatalf("every branch: %d points, want 4", len(all))
	}
}

func TestComparisons(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	c := Comparison{Scenario: "copy", Point: "clients=1", Metric: "elapsed", BaseKey: "a", HeadKey: "b", Verdict: "different",
		Ratio: 1.104, RatioLow: 1.08, RatioHigh: 1.12, P: 0.001, NBase: 10, NHead: 12, Detail: json.RawMessage(`{"warnings":["few samples"]}`),
		BisectionID: "bis1"}
	id, err := s.RecordComparison(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Comparisons(ctx, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != id || got[0].Verdict != "different" || got[0].Ratio != 1.104 || got[0].NHead != 12 ||
		got[0].BisectionID != "bis1" || got[0].NightlyID != 0 {
		t.Fatalf("got %+v", got)
	}
	if others, _ := s.Comparisons(ctx, "b", "a"); len(others) != 0 {
		t.Fatal("comparisons are directional: b vs a is another comparison")
	}
}

// TestBisections: a state saved at each step is loaded back whole, the row's
// status follows the phase, and an unknown id is bisect.ErrNotFound.
func TestBisections(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	commits := []bisect.Commit{
		{Hash: "1111111111111111111111111111111111111111", Subject: "good", Key: "k1"},
		{Hash: "2222222222222222222222222222222222222222", Subject: "middle", Key: "k2"},
		{Hash: "3333333333333333333333333333333333333333", Subject: "bad", Key: "k3"},
	}
	in := bisect.Inputs{Repo: "/src/postgres", Good: commits[0].Hash, Bad: commits[2].Hash, Scenario: "copy-single", Metric: "elapsed"}
	b, err := bisect.NewState(in, commits, time.Date(2026, 1, 30, 2, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadBisection(ctx, b.ID); !errors.Is(err, bisect.ErrNotFound) || !strings.Contains(err.Error(), "pgbisect status") {
		t.Fatalf("got %v, want bisect.ErrNotFound", err)
	}
	if err := s.SaveBisection(ctx, b); err != nil {
		t.Fatal(err)
	}
	running, err := s.Bisections(ctx, string(bisect.PhaseEndpoints))
	if err != nil || len(running) != 1 || running[0].ID != b.ID {
		t.Fatalf("bisections in their endpoint phase: %+v %v", running, err)
	}
	b.Samples["k1"] = []float64{10, 10.1, 9.9}
	b.SampleSeq["k1"] = []int{0, 1, 2}
	b.SamplesTaken = 3
	b.Phase = bisect.PhaseDone
	if err := s.SaveBisection(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadBisection(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != b.ID || got.Phase != bisect.PhaseDone || len(got.Commits) != 3 || got.Commits[1].Subject != "middle" ||
		!slices.Equal(got.Samples["k1"], b.Samples["k1"]) || got.Inputs.Scenario != "copy-single" {
		t.Fatalf("loaded %+v", got)
	}
	if done, err := s.Bisections(ctx, string(bisect.PhaseDone)); err != nil || len(done) != 1 {
		t.Fatalf("done bisections: %+v %v", done, err)
	}
	b.Phase = ""
	if err := s.SaveBisection(ctx, b); err == nil {
		t.Fatal("a state without a phase was accepted")
	}
}

// TestFindingsOutbox: a saved finding is pending, with its posts, until
// settled; saving it again replaces it and keeps its posts.
func TestFindingsOutbox(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	f := Finding{ID: "20260130T021500Z-copy-single-9f8377f7a2", Kind: "regression", Branch: "master",
		Culprits: []string{"9f8377f7a27", "faff8f8e47f"}, Scenario: "copy-single", Metric: "elapsed",
		Ratio: 1.104, RatioLow: 1.09, RatioHigh: 1.12, P: 0.0004, N: 15, Report: json.RawMessage(`{"id":"x"}`),
		Time: time.Date(2026, 1, 30, 2, 15, 0, 0, time.UTC)}
	if err := s.SaveFinding(ctx, f); err != nil {
		t.Fatal(err)
	}
	other := Finding{ID: "20260131T021500Z-build", Kind: "build-failure", Time: f.Time.Add(24 * time.Hour)}
	if err := s.SaveFinding(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkPosted(ctx, f.ID, finding.Post{Key: "[master] 9f8377f7a2:", Action: "created", Repo: "pgbisect/results", Issue: 7,
		URL: "https://github.com/pgbisect/results/issues/7"}); err != nil {
		t.Fatal(err)
	}
	f.N = 20
	if err := s.SaveFinding(ctx, f); err != nil {
		t.Fatal(err)
	}
	pending, err := s.PendingFindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 || pending[0].ID != f.ID || pending[1].ID != other.ID {
		t.Fatalf("pending %+v", pending)
	}
	p0 := pending[0]
	if p0.N != 20 || !slices.Equal(p0.Culprits, f.Culprits) || p0.Ratio != 1.104 || len(p0.Posts) != 1 ||
		p0.Posts[0].Issue != 7 || p0.Posts[0].Action != "created" || p0.Settled {
		t.Fatalf("pending[0] = %+v", p0)
	}
	if len(pending[1].Posts) != 0 || pending[1].Culprits == nil {
		t.Fatalf("pending[1] = %+v", pending[1])
	}
	if err := s.SettleFinding(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveFinding(ctx, f); err != nil {
		t.Fatal(err)
	}
	pending, err = s.PendingFindings(ctx)
	if err != nil || len(pending) != 1 || pending[0].ID != other.ID {
		t.Fatalf("after settling: %+v %v", pending, err)
	}
	got, err := s.Finding(ctx, f.ID)
	if err != nil || !got.Settled || len(got.Posts) != 1 {
		t.Fatalf("Finding: %+v %v", got, err)
	}
	if _, err := s.Finding(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing finding: %v", err)
	}
	if err := s.SettleFinding(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("settling a missing finding: %v", err)
	}
	// Last: a failed statement aborts the test's transaction.
	if err := s.MarkPosted(ctx, "nope", finding.Post{Repo: "o/r", Issue: 1}); err == nil {
		t.Fatal("a post of a finding that does not exist was recorded")
	}
}

func TestNightly(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	if _, err := s.LastNightly(ctx, "master"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no nightly yet: %v", err)
	}
	t0 := time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)
	good := &NightlyRun{Branch: "master", Commit: "c1", Status: "running", Started: t0}
	if err := s.RecordNightly(ctx, good); err != nil || good.ID == 0 {
		t.Fatalf("%v id %d", err, good.ID)
	}
	good.Status, good.Finished = "ok", t0.Add(time.Hour)
	if err := s.RecordNightly(ctx, good); err != nil {
		t.Fatal(err)
	}
	bad := &NightlyRun{Branch: "master", Commit: "c2", Status: "build-failed", Started: t0.Add(24 * time.Hour), Detail: json.RawMessage(`{"log":"tail"}`)}
	if err := s.RecordNightly(ctx, bad); err != nil {
		t.Fatal(err)
	}
	last, err := s.LastNightly(ctx, "master")
	if err != nil || last.ID != bad.ID || last.Commit != "c2" || !last.Finished.IsZero() {
		t.Fatalf("last: %+v %v", last, err)
	}
	lastGood, err := s.LastNightly(ctx, "master", "ok")
	if err != nil || lastGood.ID != good.ID || !lastGood.Finished.Equal(t0.Add(time.Hour)) {
		t.Fatalf("last good: %+v %v", lastGood, err)
	}
	if _, err := s.LastNightly(ctx, "REL_16_STABLE"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other branch: %v", err)
	}
}
