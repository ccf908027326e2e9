package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// TestServerStatVersionMapping pins which query each statistic uses at
// each release, and which releases lack it.
func TestServerStatVersionMapping(t *testing.T) {
	cases := []struct {
		value   string
		version int
		query   string // substring of the SQL; "" when skipped
		note    string // substring of the note when skipped
	}{
		{"wal_bytes", 90624, "pg_current_xlog_location()", ""},
		{"wal_bytes", 100023, "pg_current_wal_lsn()", ""},
		{"wal_bytes", 130014, "pg_current_wal_lsn()", ""},
		{"wal_bytes", 180000, "pg_current_wal_lsn()", ""},
		{"wal_records", 130014, "", "new in PostgreSQL 14"},
		{"wal_records", 140000, "wal_records FROM pg_stat_wal", ""},
		{"wal_fpi", 180000, "wal_fpi FROM pg_stat_wal", ""},
		{"wal_write", 90624, "", "new in PostgreSQL 14"},
		{"wal_write", 170000, "wal_write FROM pg_stat_wal", ""},
		{"wal_sync", 180000, "", "left in PostgreSQL 18"},
		{"buffers_backend", 90624, "buffers_backend FROM pg_stat_bgwriter", ""},
		{"buffers_backend", 160000, "buffers_backend FROM pg_stat_bgwriter", ""},
		{"buffers_backend", 170000, "sum(writes + extends)", ""},
		{"buffers_backend", 170000, "'client backend'", ""},
		{"buffers_clean", 90624, "buffers_clean FROM pg_stat_bgwriter", ""},
		{"buffers_clean", 180000, "buffers_clean FROM pg_stat_bgwriter", ""},
		{"buffers_checkpoint", 150000, "buffers_checkpoint FROM pg_stat_bgwriter", ""},
		{"buffers_checkpoint", 170000, "buffers_written FROM pg_stat_checkpointer", ""},
		{"checkpoints", 160000, "checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter", ""},
		{"checkpoints", 170000, "num_timed + num_requested FROM pg_stat_checkpointer", ""},
		{"io_reads", 150000, "", "pg_stat_io is new in PostgreSQL 16"},
		{"io_reads", 160000, "sum(reads), 0) FROM pg_stat_io", ""},
		{"io_writes", 180000, "sum(writes), 0) FROM pg_stat_io", ""},
		{"io_extends", 170000, "sum(extends), 0) FROM pg_stat_io", ""},
	}
	for _, c := range cases {
		sql, note := serverValues[c.value].query(c.version)
		if c.query == "" {
			if sql != "" || !strings.Contains(note, c.note) {
				t.Errorf("%s at %d: query %q note %q, want skipped with %q", c.value, c.version, sql, note, c.note)
			}
			continue
		}
		if !strings.Contains(sql, c.query) || note != "" {
			t.Errorf("%s at %d: query %q note %q, want a query with %q", c.value, c.version, sql, note, c.query)
		}
	}
	if q := waitQuery(90624); strings.Contains(q, "backend_type") {
		t.Errorf("9.6 has no backend_type: %s", q)
	}
	if q := waitQuery(150000); !strings.Contains(q, "backend_type = 'client backend'") {
		t.Errorf("10+ wait query keeps to client backends: %s", q)
	}
}

func TestCountWaits(t *testing.T) {
	w := map[string]int{"Lock:advisory": 5, "Lock:relation": 2, "LWLock:WALWrite": 3}
	for want, n := range map[string]int{"": 10, "Lock": 7, "Lock:advisory": 5, "LWLock:WALWrite": 3, "IO": 0, "advisory": 0} {
		if got := countWaits(w, want); got != n {
			t.Errorf("countWaits(%q) = %d, want %d", want, got, n)
		}
	}
}

func TestDiskstats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "diskstats")
	data := "   8       0 sda 100 0 2000 50 300 0 4000 80 0 0 0 0\n   8       1 sda1 10 0 200 5 30 0 400 8 0 0 0 0\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	r, w, note := diskstatsFor(path, 8, 1)
	if r != 200*512 || w != 400*512 || note != "" {
		t.Errorf("8:1: read %v written %v note %q", r, w, note)
	}
	if _, _, note := diskstatsFor(path, 0, 45); !strings.Contains(note, "0:45 is not in diskstats") {
		t.Errorf("overlay device: note %q", note)
	}
}

func TestServerMetricLoading(t *testing.T) {
	base := "workload:\n  - name: w\n    sql: SELECT 1\nmetrics:\n"
	sc, err := Load([]byte(base+"  - {name: wal, step: w, value: wal_bytes}\n  - {name: lk, step: w, value: wait_events, wait_event: Lock, record: true}\n"), "x.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ms := sc.MetricSpecs()
	if ms[0].Unit != "bytes" || ms[0].Direction != stats.LowerIsBetter || ms[1].Interval != defaultWaitInterval || ms[1].key() != "wait_events:Lock" || ms[0].Record || !ms[1].Record {
		t.Errorf("defaults: %+v", ms)
	}
	if got := sc.serverMetrics()["w"]; len(got) != 2 {
		t.Errorf("server metrics of w: %+v", got)
	}
	for yaml, want := range map[string]string{
		"  - {name: wal, step: w, value: wal_byte}\n":                                                      `x.yaml:5: metric "wal": unknown value "wal_byte" (did you mean "wal_bytes"?)`,
		"  - {name: wal, step: w, value: wal_bytes, wait_event: Lock}\n":                                   `x.yaml:5: metric "wal": wait_event and interval belong to value: wait_events`,
		"  - {name: lk, step: w, value: wait_events, interval: 10us}\n":                                    `x.yaml:5: metric "lk": interval 10µs: sample at most every millisecond`,
		"  - {name: lk, step: w, value: wait_events, wait_even: Lock}\n":                                   `unknown key "wait_even" (did you mean "wait_event"?)`,
		"  - {name: lk, step: w, value: wait_events, direction: sideways}\n":                               `direction "sideways"`,
		"  - {name: cpu, step: x, value: cpu_user}\n":                                                      `no workload step named "x"`,
		"  - {name: wal, step: w, value: wal_bytes}\n  - {name: e, step: w, value: wal_bytes, unit: ms}\n": ``,
	} {
		_, err := Load([]byte(base+yaml), "x.yaml", nil)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", yaml, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", yaml, err, want)
		}
	}
}

// insertStep begins the statistics tests' scenarios: a table, and one step
// that writes WAL and dirty buffers, checkpoints and burns some CPU.
const insertStep = `name: serverstats
setup:
  - sql: CREATE TABLE t (a int, b text)
workload:
  - name: insert
    sql: |
      INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g;
      CHECKPOINT;
      SELECT sum(hashtext(g::text)) FROM generate_series(1, 1000000) g;
`

// serverStatsScenario writes WAL and dirty buffers in one step and takes
// a contended advisory lock in another (two pgbench clients, each holding
// the lock across a sleep), with an uncontended run of the same script as
// the control.
const serverStatsScenario = insertStep + `  - name: contended
    pgbench:
      args: [-n, -c, "2", -t, "40"]
      script: |
        SELECT pg_advisory_lock(1);
        SELECT pg_sleep(0.01);
        SELECT pg_advisory_unlock(1);
  - name: alone
    pgbench:
      args: [-n, -c, "1", -t, "40"]
      script: |
        SELECT pg_advisory_lock(1);
        SELECT pg_sleep(0.01);
        SELECT pg_advisory_unlock(1);
metrics:
  - {name: wal, step: insert, value: wal_bytes}
  - {name: records, step: insert, value: wal_records}
  - {name: ckpt_buffers, step: insert, value: buffers_checkpoint}
  - {name: checkpoints, step: insert, value: checkpoints}
  - {name: backend_buffers, step: insert, value: buffers_backend}
  - {name: io, step: insert, value: io_writes}
  - {name: cpu_user, step: insert, value: cpu_user, unit: ms}
  - {name: cpu_sys, step: insert, value: cpu_system}
  - {name: disk_w, step: insert, value: disk_write_bytes}
  - {name: advisory, step: contended, value: wait_events, wait_event: "Lock:advisory", interval: 5ms}
  - {name: lock_alone, step: alone, value: wait_events, wait_event: Lock, interval: 5ms}
  - {name: pg_sleep, step: alone, value: wait_events, wait_event: "Timeout:PgSleep", interval: 5ms}
  - {name: tps, step: contended, value: tps}
`

// TestServerStatsReal measures the server statistics on a real
// PostgreSQL 15: WAL and checkpoint counters move under inserts, a
// statistic 15 lacks (pg_stat_io) is skipped with a note, and advisory
// lock waits are counted when two clients contend and not when one runs.
func TestServerStatsReal(t *testing.T) {
	bin := pgBin(t)
	r, _ := newTestRunner(t)
	sc, err := Load([]byte(serverStatsScenario), "serverstats.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := r.Run(ctx, sc, Target{Name: "pg15", BinDir: bin}, Point{})
	if err != nil {
		t.Fatal(err)
	}
	v := s.Values
	t.Logf("values: %v\nwarnings: %v", v, s.Env.Warnings)
	// 20,000 rows of ~130 bytes are well over 2 MB of WAL.
	if v["wal"] < 2e6 || v["wal"] > 1e8 {
		t.Errorf("wal_bytes = %v, want 2 MB..100 MB", v["wal"])
	}
	if v["records"] < 1 {
		t.Errorf("wal_records = %v, want > 0", v["records"])
	}
	if v["checkpoints"] < 1 || v["ckpt_buffers"] < 100 {
		t.Errorf("CHECKPOINT after inserts: checkpoints %v, buffers_checkpoint %v", v["checkpoints"], v["ckpt_buffers"])
	}
	if _, ok := v["backend_buffers"]; !ok || v["backend_buffers"] < 0 {
		t.Errorf("buffers_backend = %v (present %v)", v["backend_buffers"], ok)
	}
	// The step's last statement keeps a backend busy for about half a
	// second: the kernel's tick accounting can miss the inserts alone.
	if v["cpu_user"]+v["cpu_sys"]*1000 <= 0 {
		t.Errorf("server CPU: user %v ms, system %v s", v["cpu_user"], v["cpu_sys"])
	}
	if _, ok := v["io"]; ok || !hasWarning(s.Env.Warnings, "metric io skipped: pg_stat_io is new in PostgreSQL 16") {
		t.Errorf("io_writes on 15: value %v, warnings %v; want skipped with a note", v["io"], s.Env.Warnings)
	}
	if _, ok := v["disk_w"]; !ok && !hasWarning(s.Env.Warnings, "metric disk_w skipped") {
		t.Errorf("disk_write_bytes neither measured nor skipped with a note")
	}
	// 80 transactions each hold the lock for 10 ms; with two clients the
	// other one waits for most of that second.
	if v["advisory"] < 10 {
		t.Errorf("contended advisory lock: %v Lock:advisory samples, want many", v["advisory"])
	}
	if v["lock_alone"] != 0 {
		t.Errorf("one client: %v Lock samples, want 0", v["lock_alone"])
	}
	if v["pg_sleep"] < 10 {
		t.Errorf("one client sleeping 40 x 10 ms: %v Timeout:PgSleep samples, want many", v["pg_sleep"])
	}
}

func hasWarning(ws []string, prefix string) bool {
	for _, w := range ws {
		if strings.HasPrefix(w, prefix) {
			return true
		}
	}
	return false
}
