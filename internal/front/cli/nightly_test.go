package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/app/nightly"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

// TestNightlyEndToEnd runs three nightly passes for real over a local
// "origin" repository made from the PostgreSQL 15 fixture: the first builds
// the release and measures it; then ten commits are pushed, one of them the
// demo's injected COPY regression, and the second pass must detect it, bisect
// it and report a finding naming that commit; the third, with nothing new,
// must do nothing. The pushed commits are the demo's own (same parent, edits
// and dates, so the same hashes): their builds are shared with the demo
// test through the common build cache.
func TestNightlyEndToEnd(t *testing.T) {
	state := pgsrctest.EndToEnd(t)
	ctx := context.Background()
	work := t.TempDir()
	// The server user must reach the results cluster under it.
	for _, d := range []string{filepath.Dir(work), work} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	origin := filepath.Join(work, "origin.git")
	base, err := pgsrc.NewRepo(ctx, origin)
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + origin
	t.Cleanup(func() {
		// The clone pgbisect made of this test's origin is of no use to
		// later runs; the builds it fed stay in the shared cache.
		if r, err := build.Open(ctx, url, state, nil); err == nil {
			os.RemoveAll(r.Dir())
		}
	})

	// A results database of the test's own, stopped at the end.
	results := filepath.Join(work, "results")
	if err := os.Mkdir(results, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, store.Config{StateDir: results, RunAs: "pgbisect", StopOnClose: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// copy-single with 200,000 rows: a sample takes about a second.
	scenario, err := os.ReadFile("../../../configs/scenarios/copy-single.yaml")
	if err != nil {
		t.Fatal(err)
	}
	small := strings.Replace(string(scenario), "rows: 8000000", "rows: 200000", 1)
	if small == string(scenario) {
		t.Fatal("copy-single.yaml no longer sets rows: 8000000; update this test")
	}
	if err := os.WriteFile(filepath.Join(work, "copy-single.yaml"), []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(work, "pgbisect.yaml")
	// A 15-sample budget per side is plenty for the injected regression
	// (tens of percent) and bounds the test's time on a busy machine.
	cfg := fmt.Sprintf("repo: %s\nbranch: master\nstats:\n  max_samples: 15\nnightly:\n  scenarios: [copy-single.yaml]\n", url)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	pass := func(n int) (stdout string, run store.NightlyRun, detail nightly.Detail) {
		t.Helper()
		var out, errb bytes.Buffer
		start := time.Now()
		code := Main(ctx, []string{"nightly", "--config", cfgFile, "--state", state, "--db", st.Cluster().URL(), "--no-post", "--wait"}, &out, &errb)
		if code != 0 {
			t.Fatalf("pass %d: pgbisect nightly exited %d:\n%s", n, code, proctest.LastLines(errb.String(), 60))
		}
		run, err := st.LastNightly(ctx, "master")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(run.Detail, &detail); err != nil {
			t.Fatal(err)
		}
		t.Logf("pass %d (%s):\n%s", n, time.Since(start).Round(time.Second), out.String())
		return out.String(), run, detail
	}

	out, run, _ := pass(1)
	if run.Status != nightly.StatusFirst || run.Commit != base {
		t.Fatalf("pass 1: %s at %s, want %s at the base %s\n%s", run.Status, build.Short(run.Commit), nightly.StatusFirst, build.Short(base), out)
	}
	series, err := st.Series(ctx, "master", "copy-single", "copy_time", "")
	if err != nil || len(series) != 1 || len(series[0].Values) == 0 {
		t.Fatalf("pass 1 stored no copy_time series: %+v %v", series, err)
	}

	var culprit, head string
	for i, s := range demoSteps[:10] {
		head, err = pgsrc.Commit(origin, s.msg, pgsrc.BaseDate.Add(time.Duration(i+1)*time.Hour),
			map[string]func(string) (string, error){s.path: s.edit(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		if s.kind == "copy-regression" {
			culprit = head
		}
	}

	out, run, detail := pass(2)
	if run.Status != nightly.StatusRegression || run.Commit != head || detail.Base != base {
		t.Fatalf("pass 2: %s at %s against %s, want a regression at %s against %s\n%s", run.Status, build.Short(run.Commit),
			build.Short(detail.Base), build.Short(head), build.Short(base), out)
	}
	// The finding waits in the store's outbox (not posted: --no-post), and
	// the bisection's samples are in the store under its ID.
	box := st
	pending, err := box.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, id := range detail.Findings {
		o, err := box.LoadFinding(ctx, id)
		if err != nil {
			t.Fatalf("finding %s of pass 2: %v", id, err)
		}
		if !slices.ContainsFunc(pending, func(p finding.Outgoing) bool { return p.Finding.ID == id }) {
			t.Errorf("finding %s is not pending in the outbox", id)
		}
		if o.Finding.Kind == finding.Regression {
			bid := id[strings.LastIndexByte(id, '-')+1:]
			if n, err := st.Samples(ctx, store.SampleQuery{BisectionID: bid, AnyPoint: true}); err != nil || len(n) == 0 {
				t.Errorf("no samples stored under bisection %s (%v)", bid, err)
			}
		}
		f := o.Finding
		if f.Kind != finding.Regression {
			continue
		}
		if f.Series == nil || len(f.Series.Points) != 2 {
			t.Errorf("finding %s has no nightly series of two nights: %+v", id, f.Series)
		}
		for _, c := range f.Culprits {
			named = append(named, c.Commit.Hash)
			if !c.Verified || c.IsRange() {
				t.Errorf("culprit %s: verified %v, range of %d", c.Commit.ShortHash(), c.Verified, len(c.Range))
			}
			checkCulpritProfile(t, c, "NextCopyFrom", filepath.Join(notify.ReportsDir(state), id))
		}
	}
	if len(named) != 1 || named[0] != culprit {
		t.Fatalf("pass 2 blamed %v, want exactly the injected regression %s\n%s", named, build.Short(culprit), out)
	}

	out, run, _ = pass(3)
	if run.Status != nightly.StatusUnchanged || !strings.Contains(out, "unchanged") {
		t.Fatalf("pass 3: %s, want %s\n%s", run.Status, nightly.StatusUnchanged, out)
	}
}

// TestNightlyPrintSigns: the nightly lines give the signed change of each
// metric with its direction: a throughput that fell is "-22.0%, higher is
// better", never +22.0%.
func TestNightlyPrintSigns(t *testing.T) {
	res := &nightly.Result{
		Run: store.NightlyRun{Branch: "master", Commit: "c24e9ef3302b0f3a9a8d7c6b5a4f3e2d1c0b9a88", Status: nightly.StatusRegression},
		Detail: nightly.Detail{
			Results: []nightly.MetricResult{{Scenario: "clog", Point: "clients=16", Metric: "tps", Verdict: "regression",
				Change: -0.22, Worse: 0.22, Direction: stats.HigherIsBetter, P: 0.0001, N: 12}},
			ChangePoints: []nightly.Candidate{{Scenario: "copy", Metric: "copy_time", At: "aaaaaaaaaaaa", Before: "bbbbbbbbbbbb", Until: "cccccccccccc",
				RelChange: 0.08, Verdict: "regression", Change: 0.075, Direction: stats.LowerIsBetter}},
		},
	}
	var out bytes.Buffer
	nightlyPrint(&out, res)
	for _, want := range []string{
		"clog clients=16: tps -22.0%, higher is better: regression",
		"re-measured bbbbbbbbbb..cccccccccc: copy_time +7.5%, lower is better: regression",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
