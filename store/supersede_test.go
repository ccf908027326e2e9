package store

import (
	"context"
	"slices"
	"testing"

	"github.com/pgbisect/pgbisect/bisect"
)

// TestSupersedeSamples: the samples a move superseded and those stored
// after the state's clock (by a process that died before saving it) are
// marked, kept, and left out of Current queries; the rest are not, and
// another bisection's samples are untouched.
func TestSupersedeSamples(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	var rows []Sample
	for i := range 10 {
		machine := "bench-a"
		if i >= 8 {
			machine = "bench-b"
		}
		rows = append(rows, Sample{BuildKey: "k", Commit: "c", Scenario: "sc", Metric: "m", Value: float64(i), Index: i,
			BisectionID: "bis-1", Seq: i, Machine: machine},
			Sample{BuildKey: "k", Commit: "c", Scenario: "sc", Metric: "m", Value: float64(i), Index: i, BisectionID: "bis-2", Seq: i})
	}
	if err := s.AddSamples(ctx, rows); err != nil {
		t.Fatal(err)
	}
	// Samples 5..7 were taken on bench-a for a comparison in flight when
	// the bisection moved to bench-b at 8; bench-b recorded one more (8)
	// and stored another (9) before it died.
	st := &bisect.State{ID: "bis-1", SamplesTaken: 9, Moves: []bisect.Move{{From: "bench-a", To: "bench-b", Start: 5, At: 8}}}
	for range 2 { // twice: it is idempotent
		if err := s.SupersedeSamples(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	seqs := func(q SampleQuery) (live, superseded []int) {
		got, err := s.Samples(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, sm := range got {
			if sm.Superseded {
				superseded = append(superseded, sm.Seq)
			} else {
				live = append(live, sm.Seq)
			}
		}
		return live, superseded
	}
	live, sup := seqs(SampleQuery{BisectionID: "bis-1"})
	if !slices.Equal(live, []int{0, 1, 2, 3, 4, 8}) || !slices.Equal(sup, []int{5, 6, 7, 9}) {
		t.Errorf("bis-1: live %v, superseded %v; want 0-4 and 8 live, 5-7 and 9 superseded", live, sup)
	}
	if live, sup := seqs(SampleQuery{BisectionID: "bis-1", Current: true}); len(live) != 6 || len(sup) != 0 {
		t.Errorf("current samples %v %v, want the 6 live ones", live, sup)
	}
	if live, sup := seqs(SampleQuery{BisectionID: "bis-2"}); len(live) != 10 || len(sup) != 0 {
		t.Errorf("another bisection's samples were marked: %v live, %v superseded", live, sup)
	}
	if got, _ := s.Samples(ctx, SampleQuery{Commit: "c", Metric: "m", Scenario: "sc"}); len(got) != 20 {
		t.Errorf("%d samples kept, want all 20", len(got))
	}
}
