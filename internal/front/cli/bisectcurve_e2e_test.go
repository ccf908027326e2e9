package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestBisectCurveEndToEnd bisects, for real, two points of one scenario
// in one bisection on PostgreSQL 15: COPY into int columns and into text
// columns (testdata/copy-types.yaml), over a history of a neutral .c
// comment, the demo's injected per-digit regression in pg_strtoint32, and
// a documentation commit. The regression is the culprit at type=int only;
// at type=text it is measured for the curve and not blamed.
func TestBisectCurveEndToEnd(t *testing.T) {
	state := pgsrctest.EndToEnd(t)
	ctx := context.Background()
	work := t.TempDir()
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(work, "curve.git")
	base, err := pgsrc.NewRepo(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	var hashes []string
	for i, s := range []demoStep{
		{"comment", "src/backend/utils/adt/int.c", "int.c: clarify a comment"},
		{"int-regression", "src/backend/utils/adt/numutils.c", "INJECTED REGRESSION (pgbisect test): extra per-digit work in pg_strtoint32"},
		{"doc", "doc/src/sgml/ref/copy.sgml", "doc: mention FREEZE in COPY's notes"},
	} {
		h, err := pgsrc.Commit(repo, s.msg, pgsrc.BaseDate.Add(time.Duration(i+1)*time.Hour),
			map[string]func(string) (string, error){s.path: s.edit(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	culprit, bad := hashes[1], hashes[2]

	var stdout, stderr bytes.Buffer
	code := Main(ctx, []string{"bisect", "--state", state, "--repo", repo, "-s", "testdata/copy-types.yaml",
		"--good", base, "--bad", bad, "--point", "all", "--min-effect", "0.10", "--max-samples", "10",
		"--no-revert-check", "--profile-runs", "0", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("pgbisect bisect exited %d:\n%s", code, proctest.LastLines(stderr.String(), 60))
	}
	f, err := finding.Unmarshal(stdout.Bytes())
	if err != nil {
		t.Fatalf("output is not a finding: %v\n%s", err, proctest.LastLines(stdout.String(), 20))
	}
	if f.Kind != finding.Regression || len(f.Culprits) != 1 || f.Culprits[0].Commit.Hash != culprit || f.Culprits[0].IsRange() {
		t.Fatalf("finding %s with culprits %+v, want %s alone; warnings: %v\n%s", f.Kind, f.Culprits, short(culprit), f.Warnings, proctest.LastLines(stderr.String(), 40))
	}
	if strings.Join(f.Points, " ") != "type=int type=text" {
		t.Errorf("points %v", f.Points)
	}
	byPoint := map[string]finding.Comparison{}
	for _, c := range f.Culprits[0].Comparisons {
		byPoint[c.Point] = c
	}
	atInt, atText := byPoint["type=int"], byPoint["type=text"]
	if atInt.Curve || atInt.Verdict != string(finding.Regression) || atInt.Ratio < 1.1 {
		t.Errorf("at type=int: %+v, want the culprit blamed", atInt)
	}
	// At type=text the culprit is measured for the curve; its change is
	// noise (a curve check may call noise a regression at its alpha, so
	// the test asks for much less than at type=int, not for "same").
	if !atText.Curve || atText.Good.N == 0 || atText.Ratio-1 > (atInt.Ratio-1)/2 {
		t.Errorf("at type=text: %+v, want a curve check well below type=int's %+.1f%%", atText, 100*(atInt.Ratio-1))
	}
	var points = map[string]bool{}
	for _, s := range f.Log {
		points[s.Point] = true
	}
	if !points["type=int"] || !points["type=text"] {
		t.Errorf("the log has points %v, want both", points)
	}
	if md := notify.MarkdownFile(f); !strings.Contains(md, "(curve check)") || !strings.Contains(md, "type=text") {
		t.Errorf("the report lacks the curve:\n%s", md)
	}

	// Builds are shared: the comment commit and the culprit, once each
	// (the release is the cached build).
	st, err := storetest.Store(t).LoadBisection(ctx, f.ID[strings.LastIndexByte(f.ID, '-')+1:])
	if err != nil {
		t.Fatal(err)
	}
	if st.Curve == nil || len(st.Curve.Searches) != 2 {
		t.Fatalf("saved state has no curve of two points")
	}
	if st.BuildsDone > 3 {
		t.Errorf("%d builds for 3 keys", st.BuildsDone)
	}
	t.Logf("%s", st.Summary)
	t.Logf("bisection: %d builds (%s), %d samples (%s); %s", st.BuildsDone, st.BuildTime.Round(time.Second), st.SamplesTaken, st.MeasureTime.Round(time.Second), st.Spend())
}
