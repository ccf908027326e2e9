package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestActiveStreams: a stream is under way while its last event is recent
// and not one of the ended kinds; a bisection's stream carries its phase.
func TestActiveStreams(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	for job, kinds := range map[string][]string{
		"running": {"start", "sample"},
		"ended":   {"start", "done"},
		"stale":   {"start"},
		"b-cli":   {"saved"},
	} {
		for _, k := range kinds {
			if _, err := s.AppendEvent(ctx, job, k, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.db.Exec(ctx, "UPDATE job_events SET at = now() - interval '1 hour' WHERE job_id = 'stale'"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(ctx, "INSERT INTO bisections (id, status, state) VALUES ('b-cli', 'search', '{}')"); err != nil {
		t.Fatal(err)
	}
	got, err := s.ActiveStreams(ctx, 15*time.Minute, "done")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, st := range got {
		ids = append(ids, st.JobID)
		switch st.JobID {
		case "running":
			if st.Last.Kind != "sample" || st.Last.Seq != 2 || st.BisectionStatus != "" {
				t.Errorf("running: %+v", st)
			}
		case "b-cli":
			if st.BisectionStatus != "search" {
				t.Errorf("b-cli: %+v", st)
			}
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"b-cli", "running"}) {
		t.Errorf("ActiveStreams = %v, want b-cli and running", ids)
	}
}

// TestListsPage pages bisections and findings newest first with a cursor.
func TestListsPage(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	for i, id := range []string{"b1", "b2", "b3"} {
		if _, err := s.db.Exec(ctx, `INSERT INTO bisections (id, status, state, created_at) VALUES ($1, 'done',
			'{"inputs": {"good": "g", "bad": "b", "scenario": "/x/copy.yaml", "metric": "tps"}, "outcome": "found"}', now() + $2 * interval '1 s')`, id, i); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveFinding(ctx, Finding{ID: "f" + id, Kind: "regression", Time: time.Now().Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.BisectionsPage(ctx, 2, "")
	if err != nil || len(page) != 2 || page[0].ID != "b3" || page[1].ID != "b2" || page[0].Good != "g" || page[0].Outcome != "found" ||
		page[0].Scenario != "/x/copy.yaml" || page[0].Metric != "tps" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	if page, err = s.BisectionsPage(ctx, 2, "b2"); err != nil || len(page) != 1 || page[0].ID != "b1" {
		t.Fatalf("second page: %+v %v", page, err)
	}
	if _, err := s.BisectionsPage(ctx, 2, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after an unknown bisection: %v", err)
	}
	fs, err := s.FindingsPage(ctx, 2, "fb3")
	if err != nil || len(fs) != 2 || fs[0].ID != "fb2" || fs[1].ID != "fb1" {
		t.Fatalf("findings after fb3: %+v %v", fs, err)
	}
	if _, err := s.FindingsPage(ctx, 2, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after an unknown finding: %v", err)
	}
}

// TestFindingFiles keeps a flame graph beside its finding, refuses a name
// that is a path, and answers ErrNotFound for a file it has not.
func TestFindingFiles(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	if err := s.SaveFinding(ctx, Finding{ID: "f-files", Kind: "regression"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddFile(ctx, "f-files", "flame-abc.svg", []byte("<svg/>")); err != nil {
		t.Fatal(err)
	}
	if err := s.AddFile(ctx, "f-files", "flame-abc.svg", []byte("<svg>2</svg>")); err != nil { // replaced
		t.Fatal(err)
	}
	data, _, err := s.FindingFile(ctx, "f-files", "flame-abc.svg")
	if err != nil || string(data) != "<svg>2</svg>" {
		t.Errorf("FindingFile = %q, %v", data, err)
	}
	if names, err := s.FindingFiles(ctx, "f-files"); err != nil || !slices.Equal(names, []string{"flame-abc.svg"}) {
		t.Errorf("FindingFiles = %v, %v", names, err)
	}
	if _, _, err := s.FindingFile(ctx, "f-files", "other.svg"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a file not kept: %v", err)
	}
	for _, bad := range []string{"", "../passwd", `a\b`} {
		if err := s.AddFile(ctx, "f-files", bad, nil); err == nil {
			t.Errorf("AddFile took the name %q", bad)
		}
	}
}
