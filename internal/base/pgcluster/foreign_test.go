package pgcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// TestForeignServerRefused: a user that runs a PostgreSQL server pgbisect
// did not make (as Debian's postgres runs the system cluster) is refused as
// the benchmark user, with the server's pid and data directory named; once
// the server carries pgbisect's marker beside its data directory (a
// cluster pgbisect made), or when the user runs nothing, it is accepted.
func TestForeignServerRefused(t *testing.T) {
	bin := pgBin(t)
	citest.Root(t, "the server runs as another OS user, whose processes only root sees working")
	probe := lookup(t, "pgbisect-probe")
	if err := CheckBenchUser(probe); err != nil {
		t.Fatalf("pgbisect-probe runs nothing yet: %v", err)
	}
	c := &Cluster{BinDir: bin, User: probe, Auth: Peer, Superuser: "pgbisect-probe"}
	startCluster(t, c)

	err := CheckBenchUser(probe)
	if err == nil {
		t.Fatal("a user running a server pgbisect did not make was accepted as run_as")
	}
	data, _ := filepath.EvalSymlinks(c.Data())
	for _, want := range []string{`"pgbisect-probe"`, data, "pid ", proc.BenchUser} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %q", err, want)
		}
	}
	if err := os.WriteFile(filepath.Join(c.Dir, MarkerFile), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckBenchUser(probe); err != nil {
		t.Errorf("a cluster pgbisect made (marker beside its data directory) was taken for a foreign one: %v", err)
	}
}
