package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// secretToken is what the isolation test puts in pgbisect's environment
// and looks for in every process a sample starts.
const secretToken = "ghp_benchisolationTOKEN0123456789"

// secretsScenario looks, from a shell step run as the server's user, at
// the environment of every process that user can read: itself, the
// postmaster and its children, and anything else a sample started. The
// first step proves that the postmaster's environment is readable at all,
// so that a zero from the second step means something.
const secretsScenario = `name: secrets
workload:
  - name: readable
    shell:
      script: |
        pm=$(head -1 "$PGDATA/postmaster.pid")
        n=0
        for p in $$ $pm; do
          # /proc files have size 0: read a byte to know it is readable.
          if [ "$(head -c 1 /proc/$p/environ 2>/dev/null | wc -c)" = 1 ]; then n=$((n+1)); fi
        done
        echo $n
  - name: leaks
    shell:
      script: |
        n=0
        for f in /proc/[0-9]*/environ; do
          if grep -qa TOKEN_VALUE "$f" 2>/dev/null; then n=$((n+1)); fi
        done
        echo $n
metrics:
  - {name: readable, step: readable, value: scalar, direction: higher}
  - {name: leaks, step: leaks, value: scalar, direction: lower}
`

// TestChildrenGetNoSecrets runs a real sample with the GitHub token, a
// database URL with a password and PGPASSWORD in pgbisect's environment:
// no process the sample starts (initdb, pg_ctl, postgres, its children,
// the shell steps) has any of them.
func TestChildrenGetNoSecrets(t *testing.T) {
	bin := pgBin(t)
	t.Setenv("GITHUB_TOKEN", secretToken)
	t.Setenv("PGBISECT_DB", "postgres://bob:"+secretToken+"@db/results")
	t.Setenv("PGPASSWORD", secretToken)
	r, _ := newTestRunner(t)
	// The step looks for the token's value: other servers of the same user
	// on a shared machine are not this test's business.
	sc, err := Load([]byte(strings.Replace(secretsScenario, "TOKEN_VALUE", secretToken, 1)), "secrets.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := r.Run(ctx, sc, Target{Name: "pg", BinDir: bin}, Point{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Values["readable"] != 2 {
		t.Fatalf("the shell step read %v of its own and the postmaster's environments, want 2", s.Values["readable"])
	}
	if s.Values["leaks"] != 0 {
		t.Errorf("%v processes of the server's user have a secret in their environment", s.Values["leaks"])
	}
}

// TestBenchClusterRefusesOthers: a benchmark cluster made by the Runner's
// own code is out of reach of another local user (pgbisect-probe, made by
// scripts/setup-debian.sh) while it runs, and needs no password.
func TestBenchClusterRefusesOthers(t *testing.T) {
	bin := pgBin(t)
	citest.Root(t, "the server runs as another OS user")
	probe, err := proc.LookupUser("pgbisect-probe")
	if err != nil {
		citest.Unavailable(t, "%v (scripts/setup-debian.sh creates it)", err)
	}
	r, dir := newTestRunner(t)
	ctx := context.Background()
	c, err := newCluster(dir, bin, r.RunAs)
	if err != nil {
		t.Fatal(err)
	}
	defer c.remove()
	if err := c.initdb(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	conn, err := c.connect(ctx)
	if err != nil {
		t.Fatalf("pgbisect cannot connect: %v", err)
	}
	conn.Close(ctx)
	cmd := proc.Command(ctx, probe, bin+"/psql", "-XAtw", "-c", "SELECT 1")
	cmd.Dir = "/"
	cmd.Env = c.env()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("user %s connected to a benchmark server: %s", probe.Name, out)
	}
	if !strings.Contains(string(out), "Permission denied") {
		t.Errorf("user %s refused, but not by the socket directory: %s", probe.Name, out)
	}
	if err := c.stop(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
}
