package bench

import (
	"context"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// countedScenario counts a COPY of 20,000 rows and a parallel count(*)
// (one worker, forced) under valgrind, beside their elapsed times.
const countedScenario = `
counter: valgrind
lifecycle: restart
settings: {autovacuum: "off", max_parallel_workers_per_gather: 1, parallel_setup_cost: 0, parallel_tuple_cost: 0, min_parallel_table_scan_size: 0}
setup:
  - sql: CREATE UNLOGGED TABLE t (a int, b int, c bigint)
  - sql: COPY (SELECT g, -(g % 97), g::bigint * 1000003 FROM generate_series(1, 20000) g) TO '{{.workdir}}/rows.txt'
workload:
  - name: truncate
    sql: TRUNCATE t
  - name: copy
    copy: {table: t, file: "{{.workdir}}/rows.txt"}
  - name: scan
    sql: SELECT count(*) FROM t WHERE b < 0
metrics:
  - {name: copy_instructions, step: copy, value: instructions}
  - {name: scan_instructions, step: scan, value: instructions}
  - {name: copy_time, step: copy, value: elapsed}
`

// TestValgrindCountsReal counts instructions of a real server (Debian's
// PostgreSQL 15) under valgrind on two fresh servers: the counts are
// positive, the sample says valgrind counted them, and the two servers'
// counts agree within 0.5%.
func TestValgrindCountsReal(t *testing.T) {
	bin := pgBin(t)
	if _, err := exec.LookPath("valgrind"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("valgrind is not installed: run scripts/setup-debian.sh (apt-get install valgrind)")
		}
		t.Skip("valgrind is not installed")
	}
	sc, err := Load([]byte(countedScenario), "counted.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var samples []*Sample
	for i := 0; i < 2; i++ {
		r, _ := newTestRunner(t) // a new runner: a new cluster and server
		s, err := r.Run(ctx, sc, Target{Name: "pg15", BinDir: bin}, Point{})
		if err != nil {
			t.Fatal(err)
		}
		r.Close(ctx)
		if s.Env.Counter != CounterValgrind {
			t.Errorf("sample %d: counter %q, want valgrind", i, s.Env.Counter)
		}
		for _, k := range []string{"copy_instructions", "scan_instructions"} {
			if !(s.Values[k] > 1e6) {
				t.Errorf("sample %d: %s = %v, want millions", i, k, s.Values[k])
			}
		}
		if !strings.HasSuffix(s.Env.String(), ", instructions counted by valgrind") {
			t.Errorf("environment line does not name the counter: %s", s.Env.String())
		}
		t.Logf("sample %d: copy %.0f, scan %.0f instructions; copy %.2fs under valgrind; sample %.1fs",
			i, s.Values["copy_instructions"], s.Values["scan_instructions"], s.Values["copy_time"], s.Elapsed.Seconds())
		samples = append(samples, s)
	}
	for _, k := range []string{"copy_instructions", "scan_instructions"} {
		a, b := samples[0].Values[k], samples[1].Values[k]
		if d := math.Abs(a-b) / a; d > 0.005 {
			t.Errorf("%s: %.0f and %.0f on two fresh servers differ by %.3f%%, want at most 0.5%%", k, a, b, 100*d)
		}
	}
	// 20,000 rows of three integers: a COPY costs thousands of
	// instructions a row, so the count must grow with the rows.
	if perRow := samples[0].Values["copy_instructions"] / 20000; perRow < 500 || perRow > 1e6 {
		t.Errorf("copy: %.0f instructions a row, implausible", perRow)
	}
}

func TestCounterLoading(t *testing.T) {
	base := "workload:\n  - {name: q, sql: SELECT 1}\nmetrics:\n  - {name: n, step: q, value: instructions}\n"
	sc, err := Load([]byte(base), "c.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Counter != CounterAuto || !sc.counted() {
		t.Errorf("default counter %q, counted %v; want auto, true", sc.Counter, sc.counted())
	}
	m := sc.MetricSpecs()[0]
	if m.Unit != "instructions" || m.Direction.String() != "lower is better" {
		t.Errorf("instructions metric: unit %q direction %v", m.Unit, m.Direction)
	}
	for _, c := range []string{"perf", "valgrind", "auto"} {
		sc, err := Load([]byte("counter: "+c+"\n"+base), "c.yaml", nil)
		if err != nil || sc.Counter != c {
			t.Errorf("counter %s: %v, %v", c, sc, err)
		}
	}
	_, err = Load([]byte("counter: cachegrind\n"+base), "c.yaml", nil)
	if err == nil || !strings.Contains(err.Error(), `c.yaml:1: counter "cachegrind": use auto`) {
		t.Errorf("bad counter: %v", err)
	}
	_, err = Load([]byte("countr: perf\n"+base), "c.yaml", nil)
	if err == nil || !strings.Contains(err.Error(), `did you mean "counter"`) {
		t.Errorf("typo: %v", err)
	}
}

func TestCheckCounter(t *testing.T) {
	if err := CheckCounter(Environment{Counter: "valgrind"}, Environment{Counter: "valgrind"}); err != nil {
		t.Error(err)
	}
	err := CheckCounter(Environment{Counter: "valgrind"}, Environment{Counter: "perf"})
	if err == nil || !strings.Contains(err.Error(), "samples counted by perf cannot be compared with samples counted by valgrind") {
		t.Errorf("perf after valgrind: %v", err)
	}
	if err := CheckCounter(Environment{Counter: "perf"}, Environment{}); err == nil {
		t.Error("a sample without a counter compared with perf counts")
	}
}

// TestCounterDetection checks what auto, perf and valgrind resolve to on
// this machine against what perf itself says about hardware counters.
func TestCounterDetection(t *testing.T) {
	ctx := context.Background()
	perfOK, why := perfCounts(ctx)
	_, vgErr := exec.LookPath("valgrind")
	t.Logf("perf counts %s: %v (%s); valgrind installed: %v", perfEvent, perfOK, why, vgErr == nil)
	got, err := resolveCounter(ctx, CounterAuto)
	switch {
	case perfOK && got != CounterPerf:
		t.Errorf("auto with hardware counters: %q, %v", got, err)
	case !perfOK && vgErr == nil && got != CounterValgrind:
		t.Errorf("auto without hardware counters: %q, %v", got, err)
	case !perfOK && vgErr != nil && (err == nil || !strings.Contains(err.Error(), "apt-get install valgrind")):
		t.Errorf("auto with no counter: %v", err)
	}
	_, err = resolveCounter(ctx, CounterPerf)
	if perfOK != (err == nil) {
		t.Errorf("counter perf: %v (perf counts: %v)", err, perfOK)
	}
	if !perfOK && (err == nil || !strings.Contains(err.Error(), "counter: valgrind")) {
		t.Errorf("counter perf without counters should point at valgrind: %v", err)
	}
	if out, _ := exec.Command("perf", "stat", "-x", ",", "-e", "instructions:u", "true").CombinedOutput(); strings.Contains(string(out), "<not supported>") && perfOK {
		t.Errorf("perf says instructions are not supported, detection says they are: %s", out)
	}
}

func TestParseCounterOutput(t *testing.T) {
	v, ok := parsePerfStat("# started on x\n\n123456789,,instructions:u,1000,100.00,,\n")
	if !ok || v != 123456789 {
		t.Errorf("perf: %v %v", v, ok)
	}
	if _, ok := parsePerfStat("<not supported>,,instructions:u,0,100.00,,\n"); ok {
		t.Error("<not supported> parsed as a count")
	}
	v, err := parseCachegrind([]byte("desc: I1 cache: none\ncmd: postgres\nevents: Ir\nfl=x.c\nfn=main\n1 5\nsummary: 321840012\n"))
	if err != nil || v != 321840012 {
		t.Errorf("cachegrind: %v %v", v, err)
	}
	if _, err := parseCachegrind([]byte("events: Ir\n")); err == nil {
		t.Error("no summary accepted")
	}
}

func TestNativeScenario(t *testing.T) {
	sc, err := Load([]byte(countedScenario), "counted.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	n := sc.Native()
	if n.counted() || n != sc.Native() {
		t.Fatalf("native copy counts (%v) or is made twice", n.counted())
	}
	var names []string
	for _, m := range n.MetricSpecs() {
		names = append(names, m.Name+"="+m.Step+"/"+m.Value)
		if m.Name == NativeTime("copy_instructions") && (!m.Record || m.Unit != "s") {
			t.Errorf("native time of copy: %+v", m)
		}
	}
	want := "copy_instructions.native_time=copy/elapsed scan_instructions.native_time=scan/elapsed copy_time=copy/elapsed"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("native metrics %s, want %s", got, want)
	}
	if !sc.counted() || len(sc.MetricSpecs()) != 3 || sc.MetricSpecs()[0].Value != "instructions" {
		t.Error("Native changed the scenario itself")
	}
	plain, _ := Load([]byte("workload:\n  - {name: q, sql: SELECT 1}\nmetrics:\n  - {name: t, step: q, value: elapsed}\n"), "p.yaml", nil)
	if plain.Native() != plain {
		t.Error("a scenario without counts should be its own native form")
	}
}

// TestPerfPathWithSoftwareEvent drives the perf counter for real on a
// machine without hardware counters: the same attach, control fifo and
// parsing with perf's task-clock (msec of CPU) in place of instructions.
// On hardware counters the event is instructions:u; that was not run here.
func TestPerfPathWithSoftwareEvent(t *testing.T) {
	bin := pgBin(t)
	citest.Tool(t, "perf", "linux-perf")
	old := perfEvent
	perfEvent = "task-clock"
	defer func() { perfEvent = old }()
	if ok, why := perfCounts(context.Background()); !ok {
		citest.Unavailable(t, "perf cannot count task-clock here: %s (kernel.perf_event_paranoid, or a container without perf events)", why)
	}
	sc, err := Load([]byte(strings.Replace(countedScenario, "counter: valgrind", "counter: perf", 1)), "perf.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := newTestRunner(t)
	defer r.Close(context.Background())
	s, err := r.Run(context.Background(), sc, Target{Name: "pg15", BinDir: bin}, Point{})
	if err != nil {
		t.Fatal(err)
	}
	// task-clock of the step's backend in ms: more than nothing, less
	// than the whole step took (the server did not run under valgrind).
	copyMS, copyS := s.Values["copy_instructions"], s.Values["copy_time"]
	if s.Env.Counter != CounterPerf || !(copyMS > 0) || copyMS > 1000*copyS*1.5+50 {
		t.Errorf("perf: counter %q, copy backend %.1f ms of CPU in a %.3f s step", s.Env.Counter, copyMS, copyS)
	}
	t.Logf("copy backend task-clock %.1f ms, step %.3f s; scan %.1f ms", copyMS, copyS, s.Values["scan_instructions"])

	// A pgbench step cannot be counted by perf.
	pg, err := Load([]byte("counter: perf\nworkload:\n  - {name: b, pgbench: {args: [-i, -s, \"1\"]}}\nmetrics:\n  - {name: n, step: b, value: instructions}\n"), "pg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(context.Background(), pg, Target{Name: "pg15", BinDir: bin}, Point{})
	if err == nil || !strings.Contains(err.Error(), "cannot follow the sessions a pgbench step opens: use counter: valgrind") {
		t.Errorf("pgbench under perf: %v", err)
	}
}
