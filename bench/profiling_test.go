package bench

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/profile"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// profiledScenario runs one query; the test picks a CPU-heavy one
// (hashing the text of every number) and a lighter one (summing them).
const profiledScenario = `name: profiled
lifecycle: restart
workload:
  - name: q
    sql: "QUERY"
metrics:
  - {name: q_s, step: q, value: elapsed}
`

// profiled is profiledScenario running q, written into the file's own
// text: a value set from outside the file may only be a word (varKind).
func profiled(q string) []byte {
	return []byte(strings.Replace(profiledScenario, "QUERY", q, 1))
}

// TestProfileRealServer profiles a real PostgreSQL 15 with perf: the
// query's backend is forked after perf attaches to the postmaster, so its
// samples show that the recording is inherited; the diff of the heavy
// query against the light one names the hashing functions.
func TestProfileRealServer(t *testing.T) {
	bin := pgBin(t)
	citest.Tool(t, "perf", "apt-get install linux-perf")
	r, _ := newTestRunner(t)
	r.Profiler = &profile.Recorder{}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	load := func(q string) *Scenario {
		sc, err := Load(profiled(q), "profiled.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	light := load("SELECT sum(g) FROM generate_series(1, 1500000) g")
	heavy := load("SELECT sum(hashtext(g::text)) FROM generate_series(1, 1500000) g")
	target := Target{Name: "pg15", BinDir: bin}
	var base, culprit []profile.Profile
	for i := 0; i < 4; i++ {
		for _, side := range []struct {
			sc  *Scenario
			out *[]profile.Profile
		}{{light, &base}, {heavy, &culprit}} {
			s, err := r.Run(ctx, side.sc, target, Point{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Profile == nil || s.Profile.Warning != "" || s.Profile.Samples < 20 {
				t.Fatalf("profile of run %d: %+v", i, s.Profile)
			}
			*side.out = append(*side.out, *s.Profile)
		}
	}
	r.Close(ctx)
	d := profile.Compare(base, culprit)
	var table bytes.Buffer
	d.WriteTable(&table, 8)
	t.Logf("\n%s", table.String())
	var top []string
	for _, c := range d.TopGrowers(5, false) {
		top = append(top, c.Function)
	}
	hashing := []string{"hash_bytes", "hashtext", "hash_any", "int4out", "pg_ltoa", "pg_ultoa_n"}
	if !slices.ContainsFunc(top, func(f string) bool { return slices.Contains(hashing, f) }) {
		t.Errorf("top self growers %v name none of %v", top, hashing)
	}
	// The real change is sure with 4 runs a side: a hashing function among
	// the inclusive growers has the smallest p a rank test gives at 4
	// against 4. Self shares are not held to it: the heavy query spreads
	// its self time over many small functions (strlen, textin, hashtext),
	// and the biggest self grower can be this VM's noise (a spilled
	// generate_series reading its temporary file, BufFileRead).
	sure := slices.ContainsFunc(d.TopGrowers(5, true), func(c profile.Change) bool {
		return slices.Contains(hashing, c.Function) && c.PInclusive <= 0.05
	})
	if !sure {
		t.Errorf("no hashing function among the top inclusive growers is sure with 4 runs a side: %+v", d.TopGrowers(5, true))
	}
	var svg bytes.Buffer
	if err := profile.FlameGraphSVG(&svg, "heavy vs light", profile.Merge(base), profile.Merge(culprit)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svg.String(), top[0]) {
		t.Errorf("flame graph does not show %s", top[0])
	}
}

// TestCompareProfilesWithoutPerf compares profiles on a real server with
// a perf that is not there: one run, then a warning that says why and
// what to install, and no error (a bisection must not fail for want of a
// profile).
func TestCompareProfilesWithoutPerf(t *testing.T) {
	bin := pgBin(t)
	r, _ := newTestRunner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sc, err := Load(profiled("SELECT 1"), "profiled.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := Target{Name: "a", BinDir: bin}, Target{Name: "b", BinDir: bin}
	runs := 0
	pc, err := CompareProfiles(ctx, r, profile.Recorder{Perf: "/nonexistent/perf"}, sc, a, b, Point{}, 3, Order{}, func(Sample) { runs++ })
	r.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if runs != 1 {
		t.Errorf("%d profiled runs without perf, want 1", runs)
	}
	w := strings.Join(pc.Diff.Warnings, "; ")
	if !strings.Contains(w, "perf is not installed") || !strings.Contains(w, "no further profiled runs") || pc.Diff.BaseRuns != 0 {
		t.Errorf("comparison without perf: %+v", pc.Diff)
	}
	if _, err := CompareProfiles(ctx, r, profile.Recorder{}, sc, a, b, Point{}, 0, Order{}, nil); err == nil {
		t.Errorf("0 profiled runs accepted")
	}
}
