package bench

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestCrashLine(t *testing.T) {
	for log, want := range map[string]string{
		"LOG:  database system is ready\n2026-11-30 12:00:00 UTC [41] LOG:  client backend (PID 42) was terminated by signal 6: Aborted\nDETAIL:  x": "LOG:  client backend (PID 42) was terminated by signal 6: Aborted",
		"2026-11-30 LOG:  starting\n2026-11-30 PANIC:  could not locate a valid checkpoint record":                                                   "PANIC:  could not locate a valid checkpoint record",
		`TRAP: FailedAssertion("false", File: "postmaster.c", Line: 930, PID: 7)`:                                                                    `TRAP: FailedAssertion("false", File: "postmaster.c", Line: 930, PID: 7)`,
		"FATAL:  invalid value for parameter \"shared_buffers\": \"lots\"":                                                                           "",
		"LOG:  background worker \"logical replication launcher\" (PID 9) exited with exit code 1":                                                   "",
	} {
		if got := crashLine(log); got != want {
			t.Errorf("crashLine(%q) = %q, want %q", log, got, want)
		}
	}
}

// TestMeasureErrors checks against a real server that failures of what
// ran are *MeasureErrors with the phase, the server log and any crash,
// which a bisection skips, and that a cancellation is not one.
func TestMeasureErrors(t *testing.T) {
	bin := pgBin(t)
	r, _ := newTestRunner(t)
	target := Target{Name: "pg15", BinDir: bin}
	cases := []struct {
		name, yaml   string
		phase, crash string // crash: "" for none
		log          string // in the server log's tail
	}{
		// A value this build's server rejects is found before initdb, by
		// asking the server binary itself (bench.Server.Resolve).
		{"setting rejected", "settings: {shared_buffers: lots}\nworkload:\n  - sql: SELECT 1\nmetrics:\n  - {name: e, step: sql, value: elapsed}\n",
			"settings", "", ""},
		{"server does not start", "settings: {max_connections: 2, superuser_reserved_connections: 5}\nworkload:\n  - sql: SELECT 1\nmetrics:\n  - {name: e, step: sql, value: elapsed}\n",
			"start", "", "must be less than max_connections"},
		{"initdb fails", "initdb: [--wal-segsize=3]\nworkload:\n  - sql: SELECT 1\nmetrics:\n  - {name: e, step: sql, value: elapsed}\n",
			"initdb", "", ""},
		{"workload error", "workload:\n  - name: bad\n    sql: SELECT * FROM missing\nmetrics:\n  - {name: e, step: bad, value: elapsed}\n",
			"workload", "", `relation "missing" does not exist`},
		// A backend killed by SIGABRT, as an assertion failure would: the
		// postmaster logs it and restarts; the session's next step fails.
		{"backend crashes", "workload:\n  - name: crash\n    shell: {script: \"kill -ABRT $(psql -XAtc \\\"SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()\\\")\"}\n" +
			"  - name: after\n    sql: SELECT 1\nmetrics:\n  - {name: e, step: after, value: elapsed}\n",
			"workload", "was terminated by signal 6", "was terminated by signal 6"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc, err := Load([]byte(c.yaml), "t.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Run(context.Background(), sc, target, Point{})
			var me *MeasureError
			if !errors.As(err, &me) || !errors.Is(err, ErrUnmeasurable) {
				t.Fatalf("error %v (%T), want a *MeasureError", err, err)
			}
			if me.Phase != c.phase || me.Target != "pg15" {
				t.Errorf("phase %q target %q, want %q pg15: %v", me.Phase, me.Target, c.phase, err)
			}
			if (c.crash == "") != (me.Crash == "") || !strings.Contains(me.Crash, c.crash) {
				t.Errorf("crash %q, want %q", me.Crash, c.crash)
			}
			if c.crash != "" && !strings.Contains(me.Reason(), "crashed") {
				t.Errorf("reason %q does not say the server crashed", me.Reason())
			}
			if !strings.Contains(me.LogTail, c.log) {
				t.Errorf("server log tail lacks %q:\n%s", c.log, me.LogTail)
			}
			if c.phase != "initdb" && c.phase != "settings" {
				if b, err := os.ReadFile(me.LogPath); err != nil || !strings.Contains(string(b), c.log) {
					t.Errorf("server log copy %q: %v", me.LogPath, err)
				}
			}
			if strings.Contains(me.Reason(), "\n") {
				t.Errorf("reason is not one line: %q", me.Reason())
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		sc, err := Load([]byte("workload:\n  - sql: SELECT 1\nmetrics:\n  - {name: e, step: sql, value: elapsed}\n"), "t.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := r.Run(ctx, sc, target, Point{}); err == nil || errors.Is(err, ErrUnmeasurable) {
			t.Errorf("cancelled sample: %v, want an error that is not ErrUnmeasurable", err)
		}
	})
}
