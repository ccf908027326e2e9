package app

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/profile"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/testkit/gittest"
	"github.com/pgbisect/pgbisect/notify"
)

// TestProfileCulpritsCachedAndSkipped: a resumed bisection takes its
// culprits' profiles from the cache (no runner needed) and copies the
// flame graph next to the report; ranges and unverified culprits are not
// profiled, and 0 runs profiles nothing.
func TestProfileCulpritsCachedAndSkipped(t *testing.T) {
	state := t.TempDir()
	one := finding.Commit{Hash: "9f8377f7a27910bf0f35bf5169a8046731948a79"}
	parent := finding.Commit{Hash: "1e2d3c4b5a6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d"}
	f := &finding.Finding{ID: "20260130T020000Z-copy-single-9f8377f7a2-abc", Culprits: []finding.Culprit{
		{Commit: one, Parent: parent, Verified: true},
		{Commit: one, Parent: parent, Verified: false},
		{Commit: one, Parent: parent, Verified: true, Range: []finding.Commit{parent, one}},
	}}
	job := bisectProfileJob{Sink: func(Event) {}, StateDir: state, ID: "abc", Runs: 0}
	job.profileCulprits(context.Background(), f)
	if f.Culprits[0].Profile != nil {
		t.Fatalf("profiled with 0 runs: %+v", f.Culprits[0].Profile)
	}

	cache := filepath.Join(state, "profiles", "abc", "9f8377f7a2-1e2d3c4b5a-5")
	want := finding.Profile{ParentRuns: 5, CulpritRuns: 5, MinP: 0.0079, FlameGraph: "9f8377f7a2-1e2d3c4b5a-5.svg",
		Self: []finding.FunctionShare{{Function: "NextCopyFrom", Parent: 0.03, Culprit: 0.2, Change: 0.17, P: 0.0079}}}
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
	if line := bisectProfileLine(p); line != "self share grew most in NextCopyFrom +17.0 points (p 0.0079)" {
		t.Errorf("progress line %q", line)
	}
	if f.Culprits[1].Profile != nil || f.Culprits[2].Profile != nil {
		t.Errorf("an unverified culprit or a range was profiled")
	}
}

// TestProfileCulpritsRealServer profiles a culprit and its parent on real
// servers (Debian's PostgreSQL 15 standing in for both builds) the way a
// finished bisection does, with --profile-frame-pointers asked for on a
// repository that cannot build: the frame-pointer builds fail, the
// bisection's own builds are profiled instead with a warning saying so,
// and with perf (and root) the table has both sides' runs and the flame
// graph lies next to the report. Without perf the profile says why.
func TestProfileCulpritsRealServer(t *testing.T) {
	bin := pgsrctest.DebianBin(t)
	state := pgsrctest.ServerDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	repoDir, c1, c2, _, _ := gittest.Repo(t)
	repo, err := build.Open(ctx, repoDir, state, nil)
	if err != nil {
		t.Fatal(err)
	}
	runner := &bench.Runner{StateDir: state}
	if proc.IsRoot() {
		if runner.RunAs, err = proc.LookupUser(proc.BenchUser); err != nil {
			t.Fatal(err)
		}
	}
	defer runner.Close(context.Background())
	sc, err := bench.Load([]byte(profiledInsert), "insert.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	job := bisectProfileJob{Sink: func(e Event) { stderr.WriteString(e.Text + "\n") }, StateDir: state, ID: "abc", Runs: 2, Runner: runner, Scenario: sc,
		Builder: &bisectBuilder{cache: map[string]bisectTarget{
			c1: {Target: bench.Target{Name: build.Short(c1), BinDir: bin}, Hash: c1},
			c2: {Target: bench.Target{Name: build.Short(c2), BinDir: bin}, Hash: c2},
		}},
		FramePointers: build.NewBuilder(repo, state, build.Options{}.WithFramePointers(), io.Discard, nil),
	}
	f := &finding.Finding{ID: "20260130T020000Z-insert-abc", Culprits: []finding.Culprit{
		{Commit: finding.Commit{Hash: c2}, Parent: finding.Commit{Hash: c1}, Verified: true}}}
	job.profileCulprits(ctx, f)
	p := f.Culprits[0].Profile
	if p == nil {
		t.Fatalf("no profile; stderr:\n%s", stderr.String())
	}
	warnings := strings.Join(p.Warnings, "\n")
	if !strings.Contains(warnings, "profiled the builds without frame pointers") || p.FramePointers {
		t.Errorf("failed frame-pointer builds: frame_pointers %v, warnings %q", p.FramePointers, warnings)
	}
	if _, err := exec.LookPath("perf"); err != nil || !proc.IsRoot() {
		if p.ParentRuns+p.CulpritRuns != 0 || !strings.Contains(warnings, "no CPU profile") {
			t.Errorf("profile without perf or root: %+v", p)
		}
		return
	}
	if p.ParentRuns != 2 || p.CulpritRuns != 2 || p.MinP < 0.3 {
		t.Errorf("profile: %+v\n%s", p, stderr.String())
	}
	svg, err := os.ReadFile(filepath.Join(notify.ReportsDir(state), f.ID, p.FlameGraph))
	if p.FlameGraph == "" || err != nil || xml.Unmarshal(svg, new(struct{})) != nil {
		t.Errorf("flame graph %q: %v", p.FlameGraph, err)
	}
	if md := notify.MarkdownFile(f); !strings.Contains(md, "### Where the time went") || !strings.Contains(md, "2 and 2 runs") {
		t.Errorf("report:\n%s", md)
	}
}

// profiledInsert is a small CPU-bound workload.
const profiledInsert = `name: profiled-work
lifecycle: restart
workload:
  - name: work
    sql: SELECT count(*) FROM generate_series(1, 300000) g WHERE md5(g::text) LIKE '%ab%'
metrics:
  - {name: work_time, step: work, value: elapsed}
`

// TestProfileDecided: a culprit's profiled runs stop at the first look
// once the function whose self share grew most grew in every run (4 runs
// a side: p = 0.029), not while the runs overlap or nothing grew.
func TestProfileDecided(t *testing.T) {
	run := func(grow, other int) profile.Profile {
		return profile.Profile{Stacks: map[string]int{"main;CopyFrom": grow, "main;other": other}, Samples: grow + other}
	}
	var base, culprit, mixed []profile.Profile
	for i := range 4 {
		base = append(base, run(100+i, 900-i))
		culprit = append(culprit, run(400+i, 600-i))
		mixed = append(mixed, run(100+2*i-3, 900))
	}
	if d := profile.Compare(base, culprit); !profileDecided(d) {
		t.Errorf("a growth in every run is not decided: %+v", d.TopGrowers(1, false))
	}
	if d := profile.Compare(base, mixed); profileDecided(d) {
		t.Errorf("overlapping runs are decided: %+v", d.TopGrowers(1, false))
	}
	if d := profile.Compare(base[:3], culprit[:3]); profileDecided(d) {
		t.Errorf("3 runs a side (p at least 0.1) are decided")
	}
	if d := profile.Compare(base, base); profileDecided(d) {
		t.Errorf("nothing grew, yet decided")
	}
}
