package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestBisectMeson18EndToEnd bisects, for real, a short history on
// Debian's PostgreSQL 18.6 source built with meson and ninja: a neutral .c
// comment, a documentation commit, a commit that breaks the build (at the
// first midpoint) and its fix, the demo's injected per-row work in COPY
// FROM (in 18's CopyFromTextLikeOneRow), a regression-test commit and
// another comment. The injected commit must be named exactly and nothing
// else blamed, the broken commit tried and skipped, and no docs-only
// commit built. The release's build is
// the one TestEndToEndMeson18 (package build) shares through the test
// state directory.
func TestBisectMeson18EndToEnd(t *testing.T) {
	state := pgsrctest.EndToEnd(t)
	pgsrctest.RequireMajor(t, 18)
	ctx := context.Background()
	work := t.TempDir()
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(work, "pg18.git")
	base, err := pgsrc.NewRepoOf(ctx, repo, 18)
	if err != nil {
		t.Fatal(err)
	}
	h, err := demoCommits(repo, base, []demoStep{
		{"comment", "src/backend/commands/copyfrom.c", "copyfrom.c: comment on buffering"},
		{"doc", "doc/src/sgml/ref/copy.sgml", "doc: mention FREEZE in COPY's notes"},
		{"break", "src/backend/utils/adt/int8.c", "int8.c: refactor (BREAKS THE BUILD, pgbisect test)"},
		{"fix", "src/backend/utils/adt/int8.c", "int8.c: fix the build"},
		{"copy-regression", "src/backend/commands/copyfromparse.c", "INJECTED REGRESSION (pgbisect test): extra per-row work in CopyFromTextLikeOneRow"},
		{"regress", "src/test/regress/sql/copy.sql", "regress: note on COPY tests"},
		{"comment", "src/backend/access/heap/heapam.c", "heapam.c: comment on multi-inserts"},
	})
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(work, "pgbisect.yaml")
	if err := os.WriteFile(config, []byte("build:\n  meson: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := Main(ctx, []string{"bisect", "--config", config, "--state", state, "--repo", repo,
		"-s", "../../../configs/scenarios/copy-single.yaml", "--set", "rows=200000", "--set", "persistence=UNLOGGED",
		"--good", h.Good, "--bad", h.Bad, "--min-effect", "0.10", "--max-samples", "20",
		"--no-revert-check", "--profile-runs", "0", "--profile-guided=false", "--json"}, &stdout, &stderr)
	wall := time.Since(start)
	if code != 0 {
		t.Fatalf("pgbisect bisect exited %d after %s:\n%s", code, wall.Round(time.Second), proctest.LastLines(stderr.String(), 60))
	}
	f, err := finding.Unmarshal(stdout.Bytes())
	if err != nil {
		t.Fatalf("output is not a finding: %v\n%s", err, proctest.LastLines(stdout.String(), 20))
	}
	culprit := h.Culprits[0]
	if f.Kind != finding.Regression || len(f.Culprits) != 1 || f.Culprits[0].Commit.Hash != culprit || f.Culprits[0].IsRange() {
		t.Fatalf("finding %s with culprits %+v, want %s alone; warnings: %v\n%s", f.Kind, f.Culprits, short(culprit), f.Warnings, proctest.LastLines(stderr.String(), 40))
	}
	if f.Build.System != "meson" {
		t.Errorf("finding's build system %q, want meson", f.Build.System)
	}
	st, err := storetest.Store(t).LoadBisection(ctx, f.ID[strings.LastIndexByte(f.ID, '-')+1:])
	if err != nil {
		t.Fatal(err)
	}
	// The broken commit sits at the first midpoint: it is tried, fails
	// (an incremental ninja failure, then the clean retry) and is skipped.
	tried := false
	for _, b := range st.Builds {
		if slices.Contains(h.Docs, b.Hash) {
			t.Errorf("docs-only commit %s was built", short(b.Hash))
		}
		if b.Hash == h.Broken {
			tried = true
			if !b.Broken {
				t.Errorf("the broken commit %s was built and not skipped", short(h.Broken))
			}
		}
	}
	if !tried {
		t.Errorf("the broken commit %s was not tried", short(h.Broken))
	}
	t.Logf("%s", st.Summary)
	t.Logf("bisection on 18.6 (meson): %s wall, %d builds (%s), %d samples (%s)", wall.Round(time.Second),
		st.BuildsDone, st.BuildTime.Round(time.Second), st.SamplesTaken, st.MeasureTime.Round(time.Second))
}
