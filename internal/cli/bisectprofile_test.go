package cli

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgbisect/pgbisect/notify"
)

// TestProfileCulpritsCachedAndSkipped: a resumed bisection takes its
// culprits' profiles from the cache (no runner needed) and copies the
// flame graph next to the report; ranges and unverified culprits are not
// profiled, and 0 runs profiles nothing.
func TestProfileCulpritsCachedAndSkipped(t *testing.T) {
	state := t.TempDir()
	one := notify.Commit{Hash: "9f8377f7a27910bf0f35bf5169a8046731948a79"}
	parent := notify.Commit{Hash: "1e2d3c4b5a6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d"}
	f := &notify.Finding{ID: "20260130T020000Z-copy-single-9f8377f7a2-abc", Culprits: []notify.Culprit{
		{Commit: one, Parent: parent, Verified: true},
		{Commit: one, Parent: parent, Verified: false},
		{Commit: one, Parent: parent, Verified: true, Range: []notify.Commit{parent, one}},
	}}
	job := bisectProfileJob{Stderr: io.Discard, StateDir: state, ID: "abc", Runs: 0}
	job.profileCulprits(context.Background(), f)
	if f.Culprits[0].Profile != nil {
		t.Fatalf("profiled with 0 runs: %+v", f.Culprits[0].Profile)
	}

	cache := filepath.Join(state, "profiles", "abc", "9f8377f7a2-1e2d3c4b5a-5")
	want := notify.Profile{ParentRuns: 5, CulpritRuns: 5, MinP: 0.0079, FlameGraph: "9f8377f7a2-1e2d3c4b5a-5.svg",
		Self: []notify.FunctionShare{{Function: "NextCopyFrom", Parent: 0.03, Culprit: 0.2, Change: 0.17, P: 0.0079}}}
	data, _ := json.Marshal(want)
	if err := os.MkdirAll(filepath.Dir(cache), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cache+".json", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cache+".svg", []byte("<svg/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	job.Runs = 5
	job.profileCulprits(context.Background(), f)
	p := f.Culprits[0].Profile
	if p == nil || len(p.Self) != 1 || p.Self[0] != want.Self[0] || p.FlameGraph != "flame-9f8377f7a2.svg" {
		t.Fatalf("cached profile: %+v", p)
	}
	if svg, err := os.ReadFile(filepath.Join(notify.ReportsDir(state), f.ID, p.FlameGraph)); err != nil || string(svg) != "<svg/>" {
		t.Errorf("flame graph next to the report: %q, %v", svg, err)
	}
	if f.Culprits[1].Profile != nil || f.Culprits[2].Profile != nil {
		t.Errorf("an unverified culprit or a range was profiled")
	}
}
