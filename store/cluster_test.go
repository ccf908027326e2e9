package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/pgcluster"
	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// openPrivate opens a store on a private cluster under dir and registers a
// cleanup that stops the cluster.
func openPrivate(t *testing.T, dir string) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Config{StateDir: dir, RunAs: "postgres", Log: testLog()})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Cluster()
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	return s
}

func status(t *testing.T, c *Cluster) ClusterStatus {
	t.Helper()
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPrivateCluster is the path taken with no database configured: the
// cluster is created on first use, listens on a private socket only, is
// reused by the next Open, and an open store starts it again after a stop.
func TestPrivateCluster(t *testing.T) {
	needServer(t)
	ctx := context.Background()
	dir := stateDir(t)
	s := openPrivate(t, dir)
	c := s.Cluster()
	first := status(t, c)
	if !first.Running || first.PID == 0 {
		t.Fatalf("after Open: %+v, want running", first)
	}
	var listen string
	if err := s.pool.QueryRow(ctx, "SHOW listen_addresses").Scan(&listen); err != nil {
		t.Fatal(err)
	}
	if listen != "" {
		t.Errorf("listen_addresses = %q, want '' (socket only)", listen)
	}
	fi, err := os.Stat(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("%s has mode %o, want 0700: the socket inside is trusted", c.Dir, fi.Mode().Perm())
	}
	if proc.IsRoot() {
		u, err := proc.LookupUser("postgres")
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != u.UID {
			t.Errorf("%s is owned by uid %d, want postgres (%d)", c.Dir, st.Uid, u.UID)
		}
	}
	s.Close()

	// Left running between invocations, and reused.
	s = openPrivate(t, dir)
	if again := status(t, s.Cluster()); again.PID != first.PID {
		t.Fatalf("second Open started a new server (pid %d, was %d)", again.PID, first.PID)
	}
	if err := s.RecordBuild(ctx, Build{Key: "k1", Commit: "c1", Status: "ok"}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if st := status(t, c); st.Running || st.PID != 0 || !st.Initialized {
		t.Fatalf("after Stop: %+v", st)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stopping a stopped cluster: %v", err)
	}

	// A long-running process (the daemon) whose cluster was stopped under
	// it starts it again on its next query, with the data kept.
	if _, err := s.Build(ctx, "k1"); err != nil {
		t.Fatalf("after the cluster was stopped under an open store: %v", err)
	}
	if st := status(t, c); !st.Running || st.PID == first.PID {
		t.Fatalf("cluster %+v, want running under a new pid (was %d)", st, first.PID)
	}

	// psql reaches the store with the URL "pgbisect db url" prints.
	psql := filepath.Join(s.Cluster().BinDir, "psql")
	if s.Cluster().BinDir == "" {
		t.Fatal("BinDir not set after Start")
	}
	out, err := proc.Command(ctx, nil, psql, "-XAtc", "SELECT commit FROM builds", s.Cluster().URL()).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "c1" {
		t.Fatalf("psql %s: %v: %s", s.Cluster().URL(), err, out)
	}
}

// TestStalePostmasterPID: after a crash (the whole server killed with
// SIGKILL) postmaster.pid is left behind, and after a reboot its pid may
// belong to an unrelated process. Open must recognise both and start.
func TestStalePostmasterPID(t *testing.T) {
	needServer(t)
	ctx := context.Background()
	dir := stateDir(t)
	s := openPrivate(t, dir)
	c := s.Cluster()
	s.Close()
	pid := status(t, c).PID

	// The postmaster leads its process group (pg_ctl starts it with
	// setsid); kill the lot, as the OOM killer or a power cut would.
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGroupGone(t, pid)
	if st := status(t, c); !st.Stale || st.Running {
		t.Fatalf("after SIGKILL: %+v, want stale", st)
	}

	// The pid now names a live process that is not a postgres server.
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	pidFile := filepath.Join(c.DataDir(), "postmaster.pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(data), "\n")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(sleeper.Process.Pid)+"\n"+rest), 0o600); err != nil {
		t.Fatal(err)
	}
	if st := status(t, c); !st.Stale {
		t.Fatalf("pid of an unrelated process: %+v, want stale", st)
	}

	s = openPrivate(t, dir)
	defer s.Close()
	st := status(t, s.Cluster())
	if !st.Running || st.PID == pid || st.PID == sleeper.Process.Pid {
		t.Fatalf("after recovery: %+v (old pid %d)", st, pid)
	}
	if err := s.RecordBuild(ctx, Build{Key: "k", Commit: "c", Status: "ok"}); err != nil {
		t.Fatal(err)
	}
}

// waitGroupGone waits until no live (non-zombie) process is left in
// process group pgid: SIGKILL is delivered asynchronously, and PostgreSQL
// refuses to start while a killed backend still holds shared memory.
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		alive := groupMembers(pgid)
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of group %d survived SIGKILL", alive, pgid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func groupMembers(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after "(comm)": state ppid pgrp ...
		i := strings.LastIndexByte(string(data), ')')
		f := strings.Fields(string(data[i+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}

// TestUnreachableStateDir: a state directory the server user cannot enter
// is reported with the directory to open up, before initdb fails obscurely.
func TestUnreachableStateDir(t *testing.T) {
	if !proc.IsRoot() {
		citest.Root(t, "the cluster runs as another user only when pgbisect is root")
	}
	u, err := proc.LookupUser("postgres")
	if err != nil {
		t.Fatal(err)
	}
	d := stateDir(t)
	if err := os.Chmod(d, 0o700); err != nil { // owned by root
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d, "state", "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = pgcluster.CheckReachable(filepath.Join(d, "state"), u)
	if err == nil || !strings.Contains(err.Error(), "chmod o+x "+d) {
		t.Fatalf("got %v, want an error naming %s", err, d)
	}
	if err := os.Chmod(d, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := pgcluster.CheckReachable(filepath.Join(d, "state"), u); err != nil {
		t.Fatalf("a traversable state directory: %v", err)
	}
}

func TestNewClusterUnknownUser(t *testing.T) {
	if !proc.IsRoot() {
		citest.Root(t, "run_as is used only when pgbisect is root")
	}
	_, err := NewCluster(t.TempDir(), "no-such-user-pgbisect", nil)
	if err == nil || !strings.Contains(err.Error(), "no-such-user-pgbisect") {
		t.Fatalf("got %v, want an error naming the user", err)
	}
}

// TestOlderClusterMovedAndIsolated: a cluster made by an older pgbisect
// (trusted local connections, run as the benchmark servers' user, left
// running) is moved by the next Open to its own OS user and a random
// scram-sha-256 password, keeping its data. After that neither the
// benchmark servers' user nor another local user can connect, a client
// without the passfile is refused, and the GitHub token in pgbisect's
// environment is not in the server's.
func TestOlderClusterMovedAndIsolated(t *testing.T) {
	needServer(t)
	citest.Root(t, "the store and the benchmarks run as two OS users")
	storeUser, err := proc.LookupUser("pgbisect")
	if err != nil {
		citest.Unavailable(t, "%v (scripts/setup-debian.sh creates it)", err)
	}
	probe, err := proc.LookupUser("pgbisect-probe")
	if err != nil {
		citest.Unavailable(t, "%v (scripts/setup-debian.sh creates it)", err)
	}
	bench, err := proc.LookupUser("postgres")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir := stateDir(t)

	// The older form: made as postgres, then trust and no passfile.
	s, err := Open(ctx, Config{StateDir: dir, RunAs: "postgres", Log: testLog()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordBuild(ctx, Build{Key: "old", Commit: "c0", Status: "ok"}); err != nil {
		t.Fatal(err)
	}
	old := s.Cluster()
	s.Close()
	if err := old.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old.DataDir(), "pg_hba.conf"), []byte("local all all trust\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(old.Dir, "passfile")); err != nil {
		t.Fatal(err)
	}
	if out, err := old.pg().Run(ctx, "pg_ctl", "start", "-w", "-D", old.DataDir(), "-l", old.LogFile()); err != nil {
		t.Fatalf("starting the older cluster: %v: %s", err, out)
	}

	t.Setenv("GITHUB_TOKEN", "ghp_storeisolationTOKEN0123456789")
	s, err = Open(ctx, Config{StateDir: dir, RunAs: "pgbisect", Log: testLog()})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Cluster()
	t.Cleanup(func() {
		s.Close()
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	if b, err := s.Build(ctx, "old"); err != nil || b.Commit != "c0" {
		t.Fatalf("the moved cluster lost its data: %+v, %v", b, err)
	}
	for _, p := range []string{c.Dir, c.DataDir(), filepath.Join(c.DataDir(), "PG_VERSION"), c.SocketDir(), filepath.Join(c.Dir, "passfile")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != storeUser.UID {
			t.Errorf("%s is uid %d's, want pgbisect's (%d)", p, uid, storeUser.UID)
		}
	}
	hba, err := os.ReadFile(filepath.Join(c.DataDir(), "pg_hba.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(hba), " trust") {
		t.Errorf("pg_hba.conf still trusts:\n%s", hba)
	}

	// Without the passfile, pgbisect itself is refused.
	noPass := strings.Replace(c.URL(), "passfile=", "passfile=/nonexistent", 1)
	if out, err := proc.Command(ctx, nil, filepath.Join(c.BinDir, "psql"), "-XAtw", "-c", "SELECT 1", noPass).CombinedOutput(); err == nil {
		t.Errorf("connected without the password: %s", out)
	}
	// The benchmark servers' user and another local user cannot reach it.
	for _, u := range []*proc.User{bench, probe} {
		cmd := proc.Command(ctx, u, filepath.Join(c.BinDir, "psql"), "-XAtw", "-c", "SELECT 1", c.URL())
		cmd.Dir = "/"
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("user %s connected to the results store: %s", u.Name, out)
		} else if !strings.Contains(string(out), "Permission denied") {
			t.Errorf("user %s refused, but not by the socket directory: %s", u.Name, out)
		}
	}
	// The restarted server never saw the token.
	st := status(t, c)
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", st.PID))
	if err != nil {
		t.Fatal(err)
	}
	if len(env) == 0 || strings.Contains(string(env), "ghp_storeisolation") {
		t.Errorf("the results server's environment (%d bytes) holds the GitHub token", len(env))
	}
}

// hostileLibpqEnv sets every libpq variable pgx reads to a value that
// would break or redirect a connection that took it.
func hostileLibpqEnv(t *testing.T) {
	t.Helper()
	for k, v := range map[string]string{
		"PGPASSWORD": "not-the-password", "PGHOST": "/nonexistent", "PGPORT": "1", "PGUSER": "nobody",
		"PGDATABASE": "nodb", "PGSERVICE": "evil", "PGSERVICEFILE": "/nonexistent/pg_service.conf",
		"PGSSLMODE": "bogus", "PGPASSFILE": "/nonexistent/passfile", "PGOPTIONS": "-c default_transaction_read_only=on",
		"PGAPPNAME": "hostile", "PGCONNECT_TIMEOUT": "abc", "PGTARGETSESSIONATTRS": "standby", "PGTZ": "Mars/Olympus",
		"PGSSLROOTCERT": "/nonexistent/root.crt", "PGSSLCERT": "/nonexistent/c.crt", "PGSSLKEY": "/nonexistent/c.key",
		"PGSSLCERTMODE": "bogus", "PGSSLNEGOTIATION": "bogus", "PGREQUIREAUTH": "password", "PGCHANNELBINDING": "require",
		"PGMINPROTOCOLVERSION": "9.9", "PGMAXPROTOCOLVERSION": "9.9",
	} {
		t.Setenv(k, v)
	}
}

// TestPrivateClusterIgnoresLibpqEnv: with every libpq variable pgx reads
// set to a hostile value in pgbisect's environment, a new private store is
// created, started, migrated and used, its status read, and a start
// interrupted after the server came up but before the database was made
// (the PGPASSWORD case left exactly that) is finished by the next.
func TestPrivateClusterIgnoresLibpqEnv(t *testing.T) {
	needServer(t)
	hostileLibpqEnv(t)
	ctx := context.Background()
	dir := stateDir(t)
	s := openPrivate(t, dir)
	c := s.Cluster()
	var user, db, app, readOnly string
	if err := s.pool.QueryRow(ctx, "SELECT current_user, current_database(), current_setting('application_name'), current_setting('default_transaction_read_only')").
		Scan(&user, &db, &app, &readOnly); err != nil {
		t.Fatal(err)
	}
	if user != clusterRole || db != clusterDB || app != "pgbisect" || readOnly != "off" {
		t.Errorf("connected as %s to %s, application_name %q, read only %s: the environment reached the connection", user, db, app, readOnly)
	}
	if err := s.RecordBuild(ctx, Build{Key: "k1", Commit: "c1", Status: "ok"}); err != nil {
		t.Fatal(err)
	}
	if st := status(t, c); !st.Running || st.Err != nil {
		t.Errorf("status: %+v", st)
	}
	if sum, err := c.Summarize(ctx); err != nil || sum.Version != SchemaVersion() || sum.Rows["builds"] != 1 {
		t.Errorf("summary: %+v, %v", sum, err)
	}
	s.Close()

	// The database gone with the server still up: Start makes it again.
	conn, err := c.connect(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE "+clusterDB); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	s = openPrivate(t, dir)
	defer s.Close()
	if err := s.RecordBuild(ctx, Build{Key: "k2", Commit: "c2", Status: "ok"}); err != nil {
		t.Fatalf("after a start interrupted before the database was made: %v", err)
	}
}
