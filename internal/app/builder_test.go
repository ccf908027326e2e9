package app

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/pgcluster"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"

	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/testkit/gittest"
)

// TestBuilderBuildsAsRunAs: as root, the App's builder runs the commits'
// configure and make as run_as (the servers' user), never as root and
// never as db_run_as.
func TestBuilderBuildsAsRunAs(t *testing.T) {
	repo, _, _, _, _ := gittest.Repo(t)
	a, err := Open(context.Background(), Options{StateDir: t.TempDir(), Repo: repo, Branch: "master", RunAs: proc.BenchUser, DBRunAs: "pgbisect"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := a.Builder(context.Background(), func(Event) {})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !proc.IsRoot() && b.BuildAs != nil:
		t.Errorf("not root, yet builds run as %s", b.BuildAs.Name)
	case proc.IsRoot() && (b.BuildAs == nil || b.BuildAs.Name != proc.BenchUser):
		t.Errorf("as root, builds run as %+v, want run_as (%s)", b.BuildAs, proc.BenchUser)
	}
	a2, err := Open(context.Background(), Options{StateDir: t.TempDir(), Repo: repo, Branch: "master", RunAs: "no-such-user-pgbisect"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a2.Builder(context.Background(), func(Event) {}); proc.IsRoot() && err == nil {
		t.Error("a run_as that does not exist was accepted for builds")
	}
}

// TestRunAsRefusedWhenItRunsAServer: as root, a run_as that runs a
// PostgreSQL server pgbisect did not make (Debian's postgres and its system
// cluster, here pgbisect-probe and a cluster of its own) is refused before
// anything is built or measured, and the error says what to use instead.
func TestRunAsRefusedWhenItRunsAServer(t *testing.T) {
	citest.Root(t, "run_as is used only when pgbisect is root")
	bin := "/usr/lib/postgresql/15/bin"
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		citest.Unavailable(t, "no PostgreSQL in %s: run scripts/setup-debian.sh", bin)
	}
	probe, err := proc.LookupUser("pgbisect-probe")
	if err != nil {
		citest.Unavailable(t, "%v (scripts/setup-debian.sh --tests creates it)", err)
	}
	d := t.TempDir()
	for _, p := range []string{d, filepath.Dir(d)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c := &pgcluster.Cluster{Dir: filepath.Join(d, "c"), Port: port, BinDir: bin, User: probe, Auth: pgcluster.Peer, Superuser: "pgbisect-probe"}
	if err := c.MakeDirs(); err != nil {
		t.Fatal(err)
	}
	if err := c.Init(ctx, pgcluster.InitOptions{NoSync: true, Settings: map[string]string{"shared_buffers": "16MB"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background(), time.Minute) })

	repo, _, _, _, _ := gittest.Repo(t)
	a, err := Open(ctx, Options{StateDir: t.TempDir(), Repo: repo, Branch: "master", RunAs: "pgbisect-probe", DBRunAs: "pgbisect"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Builder(ctx, func(Event) {}); err == nil || !strings.Contains(err.Error(), "runs a PostgreSQL server pgbisect did not make") {
		t.Errorf("builds as a user running a foreign server: err %v, want a refusal", err)
	}
	if _, err := a.newRunner("", false, nil, a.log); err == nil || !strings.Contains(err.Error(), proc.BenchUser) {
		t.Errorf("benchmarks as a user running a foreign server: err %v, want a refusal naming %s", err, proc.BenchUser)
	}
}
