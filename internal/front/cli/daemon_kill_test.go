package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/internal/base/machinelock"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestDaemonsKillNineRealBisection: two real 'pgbisect daemon' processes,
// each with its own state directory and machine name, on one results
// database, and a real bisection of the demo repository queued for their
// class: four commits around the injected COPY regression, built once in
// the shared build cache. The daemon running it is killed with kill -9
// part way. The other takes the job over when the lease expires, restarts
// the comparison that was in flight (its samples kept, superseded), and
// names the injected regression; no sample is lost or taken twice. The
// killed machine, restarted, stops the servers its predecessor left
// running, so none of its state directory remains.
func TestDaemonsKillNineRealBisection(t *testing.T) {
	shared := pgsrctest.EndToEnd(t)
	ctx := context.Background()
	results := storetest.Store(t)
	work := pgsrctest.ServerDir(t)
	h, err := demoPrepare(ctx, filepath.Join(work, "demo.git"), true)
	if err != nil {
		t.Fatal(err)
	}
	// good..bad: a comment commit, then a regression-test commit (no
	// build), the injected regression, a doc commit (no build), a comment.
	good, bad, culprit := h.Commits[6], h.Commits[10], h.Culprits[0]
	if h.Commits[8] != culprit {
		t.Fatalf("the demo history changed: commit 8 is not the COPY regression")
	}
	// The builds go to the shared cache (incremental there, a cache hit
	// once made), which both daemons' state directories point to.
	var out bytes.Buffer
	if code := Main(ctx, []string{"build", "--state", shared, "--repo", h.Dir, good, culprit, bad}, &out, &out); code != 0 {
		t.Fatalf("building the range: %s", proctest.LastLines(out.String(), 30))
	}
	scenario, err := filepath.Abs("../../../configs/scenarios/copy-single.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(work, "pgbisect.yaml")
	linkScenarios(t, work)
	if err := os.WriteFile(config, []byte("repo: "+h.Dir+"\nnightly:\n  scenarios: ["+scenario+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const class = "e2e-kill9"
	lock := filepath.Join(work, "machine.lock") // one machine: one lock for both
	states := map[string]string{}
	for _, name := range []string{"kill9-a", "kill9-b"} {
		dir := filepath.Join(work, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(shared, "builds"), filepath.Join(dir, "builds")); err != nil {
			t.Fatal(err)
		}
		states[name] = dir
	}
	start := time.Now()
	daemon := func(name string) *proctest.Proc {
		return startCLI(t, name, []string{machinelock.Env + "=" + lock}, "daemon", "--config", config, "--state", states[name],
			"--machine", name, "--class", class, "--no-nightly", "--no-post", "--lease-ttl", "6s")
	}
	a, b := daemon("kill9-a"), daemon("kill9-b")
	out.Reset()
	if code := Main(ctx, []string{"request", "bisect", "--config", config, "--state", states["kill9-a"], "--class", class,
		"-s", "copy-single", "--good", good, "--bad", bad, "--metric", "copy_time", "--set", "rows=200000", "--set", "persistence=UNLOGGED",
		"--min-effect", "0.15", "--max-samples", "10", "--no-revert-check", "--profile-runs", "0"}, &out, &out); code != 0 {
		t.Fatalf("request: %s", out.String())
	}

	// The bisection appears in the store; the daemon holding the job's
	// lease is killed once the search has begun.
	var id string
	proctest.WaitUntil(t, 5*time.Minute, "the bisection is saved", func() bool {
		infos, err := results.Bisections(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			if in.Updated.After(start) {
				if s, err := results.LoadBisection(ctx, in.ID); err == nil && s.Inputs.Repo == h.Dir {
					id = in.ID
					return true
				}
			}
		}
		return false
	}, a, b)
	samples := func(q store.SampleQuery) []store.Sample {
		q.BisectionID, q.Metric = id, "copy_time"
		ss, err := results.Samples(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	var st *bisect.State
	proctest.WaitUntil(t, 5*time.Minute, "the search begins and its first comparison is part way", func() bool {
		if st, err = results.LoadBisection(ctx, id); err != nil {
			t.Fatal(err)
		}
		return st.Phase == bisect.PhaseSearch && len(st.Pairs) > 1 && st.SamplesTaken >= st.Pairs[1].From+2
	}, a, b)
	leases, err := results.ActiveLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim, other := a, b
	for _, l := range leases {
		if l.Class == class && l.Machine == b.Name {
			victim, other = b, a
		}
	}
	victim.Kill(t)
	killedAt := len(samples(store.SampleQuery{}))
	t.Logf("killed %s after %d samples (%s in); servers of its state directory left running: %d",
		victim.Name, killedAt, time.Since(start).Round(time.Second), len(postgresUnder(states[victim.Name])))

	proctest.WaitUntil(t, 5*time.Minute, "the other daemon finishes the bisection", func() bool {
		if st, err = results.LoadBisection(ctx, id); err != nil {
			t.Fatal(err)
		}
		return st.Done()
	}, other)
	t.Logf("done in %s: %s", time.Since(start).Round(time.Second), st.Summary)
	proctest.WaitUntil(t, 2*time.Minute, "the job completes", func() bool {
		var n int
		if err := results.Pool().QueryRow(ctx, "SELECT count(*) FROM river_job WHERE queue = $1 AND state = 'completed'", class).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}, other)
	// The job's log on the machine that finished it ends with the result
	// as 'pgbisect bisect' prints it (app's typed event, the CLI's printer).
	logs, _ := filepath.Glob(filepath.Join(states[other.Name], "logs", "jobs", "*.log"))
	var joblog []byte
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		joblog = append(joblog, data...)
	}
	if !strings.Contains(string(joblog), "pgbisect bisect") || !strings.Contains(string(joblog), "finding ") ||
		!strings.Contains(string(joblog), "'pgbisect report "+id+"'") {
		t.Errorf("the job log of %s lacks the command or the result:\n%s", other.Name, joblog)
	}
	var named []string
	for _, c := range st.Culprits {
		for _, i := range c.Candidates {
			named = append(named, st.Commits[i].Hash)
		}
	}
	if !slices.Equal(named, []string{culprit}) {
		t.Errorf("culprits %v, want the injected regression %s alone: %s", named, culprit[:10], st.Summary)
	}
	if m := st.Machines(); !slices.Equal(m, []string{victim.Name, other.Name}) || len(st.Moves) != 1 {
		t.Errorf("machines %v with %d moves, want %s then %s", m, len(st.Moves), victim.Name, other.Name)
	}

	// Every sample the state counts is stored once. Superseded, and kept:
	// those of the comparison restarted on the other machine (counted by
	// the state, never used again) and any the killed daemon stored but
	// never recorded (taken again on the other machine).
	all := samples(store.SampleQuery{})
	mv := st.Moves[0]
	var counted []int
	superseded := 0
	for _, s := range all {
		orphan := s.Machine == victim.Name && s.Seq >= mv.At
		if s.Superseded != (orphan || mv.Superseded(s.Seq)) {
			t.Errorf("sample %d of %s: superseded %v, want %v (move %d..%d)", s.Seq, s.Machine, s.Superseded, !s.Superseded, mv.Start, mv.At)
		}
		if s.Superseded {
			superseded++
		}
		if !orphan {
			counted = append(counted, s.Seq)
		}
		if !orphan && s.Seq >= mv.At && s.Machine != other.Name {
			t.Errorf("sample %d after the move is from %s", s.Seq, s.Machine)
		}
	}
	slices.Sort(counted)
	want := make([]int, st.SamplesTaken)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(counted, want) {
		t.Errorf("samples at clocks %v, want each of 0..%d once (none lost, none taken twice)", counted, st.SamplesTaken-1)
	}
	if mv.Start == mv.At {
		// Possible only in the instant between a verdict and the next
		// comparison's first sample; bisect.TestMoveRestartsComparisonsInFlight covers both.
		t.Logf("no comparison was in flight when %s was killed (move %+v)", victim.Name, mv)
	}
	if n := mv.At - mv.Start + max(killedAt-mv.At, 0); superseded != n {
		t.Errorf("%d samples superseded, want %d: those of the comparison restarted and those stored but never recorded", superseded, n)
	}
	other.Stop(t)

	// The killed machine comes back under its name and stops what its
	// predecessor left running.
	again := daemon(victim.Name)
	proctest.WaitUntil(t, time.Minute, victim.Name+" restarted", func() bool { return strings.Contains(again.Output(), "daemon started") }, again)
	if left := postgresUnder(states[victim.Name]); len(left) > 0 {
		t.Errorf("servers of %s's state directory still running after it restarted: %v", victim.Name, left)
	}
	again.Stop(t)
	t.Logf("%d samples (%d superseded) in %s", len(all), superseded, time.Since(start).Round(time.Second))
}

// postgresUnder lists the postgres processes whose command line names a
// path under dir.
func postgresUnder(dir string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(data), "\x00", " ")
		if strings.Contains(cmd, "postgres") && strings.Contains(cmd, dir+"/") {
			out = append(out, filepath.Base(filepath.Dir(p))+": "+cmd)
		}
	}
	return out
}

// startCLI runs pgbisect with args in a child process (the test binary,
// see TestMain), env added.
func startCLI(t *testing.T, name string, env []string, args ...string) *proctest.Proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), cliChildEnv+"=1"), env...)
	return proctest.Start(t, name, cmd)
}
