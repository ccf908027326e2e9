package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"
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
	if out := run(0, "url"); !strings.HasPrefix(out, c.URL()+"\n") {
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

// TestDBPsqlEnvironment runs "pgbisect db psql" (which execs psql, so in a
// child process) with the GitHub and web tokens set, and has psql print
// its own environment through a shell (\! env): psql sees the allowlist
// and its own variables (PAGER), never the tokens.
func TestDBPsqlEnvironment(t *testing.T) {
	if url := os.Getenv("PGBISECT_PSQL_CHILD"); url != "" {
		os.Exit(Main(context.Background(), []string{"db", "psql", "--db", url, "--", "-X", "-c", `\! env`}, os.Stdout, os.Stderr))
	}
	st := storetest.Store(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDBPsqlEnvironment$")
	cmd.Env = append(os.Environ(), "PGBISECT_PSQL_CHILD="+st.Cluster().URL(),
		"GITHUB_TOKEN=ghp_psqltestsecret", "PGBISECT_WEB_TOKEN=webpsqltestsecret", "PAGER=pgbisect-test-pager")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pgbisect db psql -- -c '\\! env': %v\n%s", err, out)
	}
	env := "\n" + string(out)
	if !strings.Contains(env, "\nPAGER=pgbisect-test-pager\n") || !strings.Contains(env, "\nPATH=") {
		t.Fatalf("psql's shell printed no environment with PATH and psql's PAGER:\n%s", out)
	}
	for _, secret := range []string{"GITHUB_TOKEN", "PGBISECT_WEB_TOKEN", "psqltestsecret", "PGBISECT_PSQL_CHILD"} {
		if strings.Contains(env, secret) {
			t.Errorf("psql's environment holds %s:\n%s", secret, out)
		}
	}
}

// TestDBStatusIgnoresLibpqEnv: with libpq's variables set to hostile values
// in the caller's environment, db start creates the store and db status
// reads it (they mean nothing to pgbisect's own store); when the server
// refuses pgbisect, db status exits non-zero and says why.
func TestDBStatusIgnoresLibpqEnv(t *testing.T) {
	storetest.NeedServer(t)
	t.Setenv("PGBISECT_DB", "")
	t.Setenv("PGBISECT_STATE", "")
	for k, v := range map[string]string{"PGPASSWORD": "not-the-password", "PGHOST": "/nonexistent", "PGPORT": "1",
		"PGUSER": "nobody", "PGDATABASE": "nodb", "PGSERVICE": "evil", "PGSSLMODE": "bogus", "PGPASSFILE": "/nonexistent",
		"PGOPTIONS": "-c default_transaction_read_only=on"} {
		t.Setenv(k, v)
	}
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
	run(0, "start")
	if out := run(0, "status"); !strings.Contains(out, "running (pid") || !strings.Contains(out, "rows:    builds 0") {
		t.Fatalf("status:\n%s", out)
	}
	// The server refuses every connection: status says so and fails.
	c, err := store.NewCluster(dir, "postgres", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(context.Background())
	if err != nil || st.PID == 0 {
		t.Fatalf("status: %+v %v", st, err)
	}
	if err := os.WriteFile(filepath.Join(c.DataDir(), "pg_hba.conf"), []byte("local all all reject\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(st.PID, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	var out string
	proctest.WaitUntil(t, time.Minute, "db status fails once the server has reloaded", func() bool {
		var o, e bytes.Buffer
		code := Main(context.Background(), []string{"db", "status", "--state", dir}, &o, &e)
		out = o.String() + e.String()
		return code != 0
	})
	if !strings.Contains(out, "does not accept pgbisect's connections") || !strings.Contains(out, "pg_hba.conf rejects connection") {
		t.Fatalf("status of a server that refuses pgbisect:\n%s", out)
	}
}
