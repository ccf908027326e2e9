package bisections

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// TestSaveLoad: a state saved at each step is loaded back whole, the row's
// status follows the phase, and an unknown id is bisect.ErrNotFound.
func TestSaveLoad(t *testing.T) {
	testDB := storetest.Store(t)
	ctx := context.Background()
	db := New(testDB)
	commits := []bisect.Commit{
		{Hash: "1111111111111111111111111111111111111111", Subject: "good", Key: "k1"},
		{Hash: "2222222222222222222222222222222222222222", Subject: "middle", Key: "k2"},
		{Hash: "3333333333333333333333333333333333333333", Subject: "bad", Key: "k3"},
	}
	in := bisect.Inputs{Repo: "/src/postgres", Good: commits[0].Hash, Bad: commits[2].Hash, Scenario: "copy-single", Metric: "elapsed"}
	s, err := bisect.NewState(in, commits, time.Date(2026, 1, 30, 2, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Save(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Samples["k1"] = []float64{10, 10.1, 9.9}
	s.SampleSeq["k1"] = []int{0, 1, 2}
	s.SamplesTaken = 3
	s.Phase = bisect.PhaseDone
	if err := db.Save(ctx, s); err != nil {
		t.Fatal(err)
	}
	got, err := db.Load(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != s.ID || got.Phase != bisect.PhaseDone || len(got.Commits) != 3 || got.Commits[1].Subject != "middle" ||
		len(got.Samples["k1"]) != 3 || got.Inputs.Scenario != "copy-single" {
		t.Fatalf("loaded %+v", got)
	}
	if _, status, err := testDB.LoadBisection(ctx, s.ID); err != nil || status != string(bisect.PhaseDone) {
		t.Fatalf("stored status %q, %v", status, err)
	}
	if _, err := db.Load(ctx, "no-such-bisection"); !errors.Is(err, bisect.ErrNotFound) {
		t.Fatalf("got %v, want bisect.ErrNotFound", err)
	}
}

// TestLoadFromFiles: a bisection an older pgbisect kept in a file resumes
// from the store's Load, and is in the store from then on.
func TestLoadFromFiles(t *testing.T) {
	testDB := storetest.Store(t)
	ctx := context.Background()
	files := &bisect.FileSaver{Dir: t.TempDir()}
	commits := []bisect.Commit{
		{Hash: "4444444444444444444444444444444444444444", Subject: "good", Key: "k4"},
		{Hash: "5555555555555555555555555555555555555555", Subject: "bad", Key: "k5"},
	}
	in := bisect.Inputs{Repo: "/src/old", Good: commits[0].Hash, Bad: commits[1].Hash, Scenario: "copy-single", Metric: "elapsed"}
	s, err := bisect.NewState(in, commits, time.Date(2026, 1, 30, 2, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	s.Samples["k4"] = []float64{1, 2}
	s.SampleSeq["k4"] = []int{0, 1}
	s.SamplesTaken = 2
	if err := files.Save(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := New(testDB).Load(ctx, s.ID); !errors.Is(err, bisect.ErrNotFound) {
		t.Fatalf("without Files: %v, want bisect.ErrNotFound", err)
	}
	got, err := (&DB{Store: testDB, Files: files}).Load(ctx, s.ID)
	if err != nil || len(got.Samples["k4"]) != 2 {
		t.Fatalf("from files: %+v, %v", got, err)
	}
	if _, err := New(testDB).Load(ctx, s.ID); err != nil {
		t.Fatalf("not moved into the store: %v", err)
	}
}
