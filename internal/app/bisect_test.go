package app

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/testkit/gittest"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestBisectResolveMergeBase: a good commit on another branch (REL_15_0
// for bad REL_16_0) is replaced by the merge base of the two, with a line
// that says so, and the commit given is returned for the report.
func TestBisectResolveMergeBase(t *testing.T) {
	dir, c1, _, c3, s1 := gittest.Repo(t)
	repo, err := build.Open(context.Background(), dir, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	a, err := Open(context.Background(), Options{Repo: dir, Branch: "master", StateDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := Sink(func(e Event) { out.WriteString(e.Text + "\n") })
	good, bad, given, err := a.bisectResolve(context.Background(), repo, "side", "master", sink)
	if err != nil {
		t.Fatal(err)
	}
	if good.Hash != c1 || bad.Hash != c3 || given != s1 {
		t.Errorf("good %s, bad %s, given %s; want the merge base %s, %s and the side branch's %s", good.Short(), bad.Short(), given, c1[:10], c3[:10], s1[:10])
	}
	if want := "bisecting from their merge base " + c1[:10]; !strings.Contains(out.String(), want) {
		t.Errorf("output %q lacks %q", out.String(), want)
	}
	// An ancestor is used as it is.
	out.Reset()
	if good, _, given, err := a.bisectResolve(context.Background(), repo, c1, "master", sink); err != nil || good.Hash != c1 || given != "" || out.Len() > 0 {
		t.Errorf("ancestor good: %s, given %q, %v, output %q", good.Short(), given, err, out.String())
	}
}

// TestBisectReportListsMachines: a bisection whose samples two machines
// took (a daemon job taken over) reports both as its host.
func TestBisectReportListsMachines(t *testing.T) {
	st := storetest.Store(t)
	ctx := context.Background()
	id := "machines-" + t.Name()
	var rows []store.Sample
	for i, m := range []string{"bench-a", "bench-a", "bench-b"} {
		rows = append(rows, store.Sample{BuildKey: "k", Commit: "c", Scenario: "s", Metric: "m", Value: 1, Index: i, BisectionID: id, Machine: m})
	}
	if err := st.AddSamples(ctx, rows); err != nil {
		t.Fatal(err)
	}
	m := &bisectMeasurer{results: st, id: id, env: &bench.Environment{}}
	if env, err := m.environment(ctx); err != nil || env.Host != "bench-a, bench-b" {
		got := env.Host
		t.Errorf("host %q (%v), want the two machines", got, err)
	}
}

// TestResumedBisectionKeepsItsCounter: a process resuming a bisection
// whose samples were counted by valgrind finds that counter in the store,
// so a sample counted by perf is refused (bisectMeasurer.measureAt).
func TestResumedBisectionKeepsItsCounter(t *testing.T) {
	st := storetest.Store(t)
	ctx := context.Background()
	id := "counter-" + t.Name()
	info, _ := json.Marshal(bench.Environment{Kernel: "6.1", Counter: bench.CounterValgrind})
	envID, err := st.Environment(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddSamples(ctx, []store.Sample{{BuildKey: "k", Commit: "c", Scenario: "s", Metric: "m", Value: 7.1e8, BisectionID: id, EnvironmentID: envID}}); err != nil {
		t.Fatal(err)
	}
	m := &bisectMeasurer{results: st, id: id}
	if got, err := m.counter(ctx); err != nil || got != bench.CounterValgrind {
		t.Fatalf("counter of the resumed bisection %q, want valgrind", got)
	}
	first, err := m.firstEnv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = bench.CheckCounter(*first, bench.Environment{Counter: bench.CounterPerf})
	if err == nil || !strings.Contains(err.Error(), "samples counted by perf cannot be compared with samples counted by valgrind") {
		t.Errorf("a perf sample in a valgrind bisection: %v", err)
	}
	fresh := &bisectMeasurer{results: st, id: "none-" + t.Name()}
	if c, err := fresh.counter(ctx); c != "" || err != nil {
		t.Errorf("a bisection without samples has a counter %q (%v)", c, err)
	}
	// A store that cannot answer is an error on the measuring path, not
	// "no sample yet" (which would skip the counter check).
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := (&bisectMeasurer{results: st, id: id}).firstEnv(cancelled); err == nil {
		t.Error("a failed read of the first sample's environment was taken for no sample")
	}
}
