package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestDBCommand drives "pgbisect db" through a private cluster's life:
// status before it exists, start (which migrates), migrate again (a no-op),
// status with the schema version,
// url, a refusal to manage a configured database, stop.
func TestDBCommand(t *testing.T) {
	storetest.NeedServer(t)
	t.Setenv("PGBISECT_DB", "")
	t.Setenv("PGBISECT_STATE", "")
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func(wantCode int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		args = append(append([]string{"db"}, args...), "--state", dir)
		if code := Main(context.Background(), args, &out, &errb); code != wantCode {
			t.Fatalf("pgbisect %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	t.Cleanup(func() { run(0, "stop") })

	if out := run(0, "status"); !strings.Contains(out, "not created yet") {
		t.Fatalf("status before start:\n%s", out)
	}
	c, err := store.NewCluster(dir, "postgres", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out := run(0, "start"); !strings.Contains(out, c.URL()) {
		t.Fatalf("start does not print the URL %s:\n%s", c.URL(), out)
	}
	run(0, "migrate")
	out := run(0, "status")
	if !strings.Contains(out, "running (pid") || !strings.Contains(out, fmt.Sprintf("schema:  version %[1]d (this pgbisect: %[1]d)", store.SchemaVersion())) || !strings.Contains(out, "rows:    builds 0") {
		t.Fatalf("status after migrate:\n%s", out)
	}
	if out := run(0, "url"); strings.TrimSpace(out) != c.URL() {
		t.Fatalf("url = %q, want %q", out, c.URL())
	}
	if out := run(1, "start", "--db", "postgres://u:secret@db.example/results"); !strings.Contains(out, "manages only the private cluster") || strings.Contains(out, "secret") {
		t.Fatalf("start with --db:\n%s", out)
	}
	if out := run(2, "restart"); !strings.Contains(out, "unknown action") {
		t.Fatalf("unknown action:\n%s", out)
	}
	run(0, "stop")
	if out := run(0, "status"); !strings.Contains(out, "state:   stopped") {
		t.Fatalf("status after stop:\n%s", out)
	}
}
