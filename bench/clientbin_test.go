package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestOnePgbenchForEveryTarget measures two targets whose bin directories
// differ in their pgbench: B's is a script that leaves a mark and fails.
// Without a ClientBin the Runner takes the first target's pgbench and keeps
// it, so B's samples run A's pgbench; with a ClientBin both sides run that
// one. Each sample names the pgbench that ran.
func TestOnePgbenchForEveryTarget(t *testing.T) {
	bin := pgBin(t)
	// Not t.TempDir: its parent is 0700, and the server's user runs these.
	base, err := os.MkdirTemp("", "pgbisect-clientbin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	other, marks := filepath.Join(base, "bin"), filepath.Join(base, "marks")
	for _, d := range []string{base, other, marks} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(marks, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"initdb", "pg_ctl", "postgres", "psql"} {
		if err := os.Symlink(filepath.Join(bin, p), filepath.Join(other, p)); err != nil {
			t.Fatal(err)
		}
	}
	mark := filepath.Join(marks, "other-pgbench-ran")
	script := "#!/bin/sh\ntouch " + mark + "\necho 'the other pgbench ran' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(other, "pgbench"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sc, err := Load([]byte("lifecycle: restart\nworkload:\n  - name: b\n    pgbench: {args: [-n, -t, \"5\"], script: \"SELECT 1;\"}\n"+
		"metrics:\n  - {name: tps, step: b, value: tps}\n"), "p.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	pt := sc.Points()[0]
	a, b := Target{Name: "A", BinDir: bin}, Target{Name: "B", BinDir: other}

	run := func(r *Runner, target Target, want string) {
		t.Helper()
		s, err := r.Run(context.Background(), sc, target, pt)
		if err != nil {
			t.Fatalf("sample of %s: %v", target.Name, err)
		}
		if s.Env.Pgbench != want || s.Values["tps"] <= 0 {
			t.Errorf("sample of %s ran pgbench %q (tps %v), want %s", target.Name, s.Env.Pgbench, s.Values["tps"], want)
		}
	}
	ranB := func() bool { _, err := os.Stat(mark); return err == nil }

	// No ClientBin: the first target's pgbench serves both.
	r, _ := newTestRunner(t)
	defer r.Close(context.Background())
	run(r, a, filepath.Join(bin, "pgbench"))
	run(r, b, filepath.Join(bin, "pgbench"))
	if ranB() {
		t.Fatal("without a ClientBin, target B's own pgbench ran after A's")
	}
	// A chosen ClientBin serves both, whichever runs first.
	r2, _ := newTestRunner(t)
	defer r2.Close(context.Background())
	r2.ClientBin = bin
	run(r2, b, filepath.Join(bin, "pgbench"))
	if ranB() {
		t.Fatal("with ClientBin set, target B's own pgbench ran")
	}
	// B's pgbench would have been noticed: run, it fails and leaves its mark.
	r2.ClientBin = other
	if _, err := r2.Run(context.Background(), sc, b, pt); err == nil || !ranB() {
		t.Fatalf("B's own pgbench: no failure (%v) or no mark", err)
	}
}
