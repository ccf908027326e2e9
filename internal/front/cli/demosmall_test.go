package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"
)

var demoSmall = flag.Bool("demo.small", false, "TestDemoSmallInstructions: bisect the demo's small regressions on instruction counts "+
	"(8 incremental builds of 15.18 and ~40 samples under valgrind: about 5 to 10 minutes)")

// TestDemoSmallSteps: the small history is the demo's, commit for commit,
// but for its two injected regressions, which are the small ones (where
// each small edit goes: pgsrc's TestDemoEditSmall).
func TestDemoSmallSteps(t *testing.T) {
	if len(demoStepsSmall) != len(demoSteps) {
		t.Fatalf("%d small steps, %d demo steps", len(demoStepsSmall), len(demoSteps))
	}
	small := 0
	for i, s := range demoStepsSmall {
		d := demoSteps[i]
		switch {
		case s.kind == "small-"+d.kind && s.path == d.path && strings.HasPrefix(s.msg, "INJECTED SMALL REGRESSION"):
			small++
		case s != d:
			t.Errorf("step %d: %+v, want %+v", i, s, d)
		}
	}
	if small != 2 {
		t.Errorf("%d small regressions, want 2", small)
	}
}

// TestDemoSmallInstructions runs "pgbisect demo --metric instructions
// --small" for real (run it with -demo.small; README, "A small
// regression"): the two injected regressions of +1.9% and +1.4% of the
// COPY's instructions must be named exactly, nothing else blamed, each
// culprit's change between 1% and 3%.
func TestDemoSmallInstructions(t *testing.T) {
	if !*demoSmall {
		t.Skip("bisects on instruction counts under valgrind for several minutes: run with -demo.small")
	}
	state := pgsrctest.EndToEnd(t)
	work := t.TempDir()
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(work, "demo-small.git")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := Main(context.Background(), []string{"demo", "--metric", "instructions", "--small", "--state", state, "--shared-fixture",
		"--repo", repo, "-s", "../../../configs/scenarios/copy-single-instructions.yaml", "--profile-runs", "0", "--json"}, &stdout, &stderr)
	wall := time.Since(start)
	if code != 0 {
		t.Fatalf("pgbisect demo --metric instructions --small exited %d after %s:\n%s", code, wall.Round(time.Second), proctest.LastLines(stderr.String(), 60))
	}
	f, err := finding.Unmarshal(stdout.Bytes())
	if err != nil {
		t.Fatalf("demo output is not a finding: %v\n%s", err, proctest.LastLines(stdout.String(), 20))
	}
	var h demoHistory
	if data, err := os.ReadFile(repo + ".json"); err != nil || json.Unmarshal(data, &h) != nil {
		t.Fatalf("reading the demo's truth: %v", err)
	}
	t.Logf("small demo on instructions: %s wall, %d builds, %d samples (%v)", wall.Round(time.Second), f.Builds, f.Samples, f.SamplesBy)
	if f.Kind != finding.Regression || f.Metric != "copy_instructions" {
		t.Fatalf("finding %s on %s, want a regression on copy_instructions; warnings: %v", f.Kind, f.Metric, f.Warnings)
	}
	var named []string
	for _, c := range f.Culprits {
		named = append(named, c.Commit.Hash)
		if c.IsRange() || !c.Verified || !slices.Contains(h.Culprits, c.Commit.Hash) {
			t.Errorf("culprit %s: range %v, verified %v; injected %v", c.Commit.ShortHash(), c.IsRange(), c.Verified, h.Culprits)
		}
		for _, m := range c.Comparisons {
			if m.Metric == "copy_instructions" && (m.Change < 0.01 || m.Change > 0.03) {
				t.Errorf("culprit %s: copy_instructions %+.2f%%, want a small regression of 1%% to 3%%", c.Commit.ShortHash(), 100*m.Change)
			}
		}
	}
	for _, c := range h.Culprits {
		if !slices.Contains(named, c) {
			t.Errorf("injected small regression %s not named (named %v)", c[:10], named)
		}
	}
}

// TestDemoSmallRepoSwitch: the same --repo with and without --small gets
// the history asked for, not the one prepared before.
func TestDemoSmallRepoSwitch(t *testing.T) {
	pgsrctest.Require(t)
	dir := filepath.Join(t.TempDir(), "demo.git")
	ctx := context.Background()
	big, err := demoPrepareSteps(ctx, dir, true, demoSteps)
	if err != nil {
		t.Fatal(err)
	}
	small, err := demoPrepareSteps(ctx, dir, true, demoStepsSmall)
	if err != nil {
		t.Fatal(err)
	}
	again, err := demoPrepareSteps(ctx, dir, true, demoStepsSmall)
	if err != nil {
		t.Fatal(err)
	}
	if big.Small || !small.Small || slices.Equal(big.Culprits, small.Culprits) || !slices.Equal(small.Culprits, again.Culprits) {
		t.Errorf("big %v (small %v), small %v (small %v), again %v: want the small history made anew, then reused",
			big.Culprits, big.Small, small.Culprits, small.Small, again.Culprits)
	}
}
