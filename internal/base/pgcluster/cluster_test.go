package pgcluster

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// The token the isolation tests look for in children's environments.
const testToken = "ghp_pgclustertestTOKEN0123456789"

func pgBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PGBISECT_TEST_PGBIN")
	if dir == "" {
		dir = "/usr/lib/postgresql/15/bin"
	}
	if _, err := os.Stat(filepath.Join(dir, "initdb")); err != nil {
		citest.Unavailable(t, "no PostgreSQL in %s: run scripts/setup-debian.sh", dir)
	}
	return dir
}

// lookup returns a local user the setup script creates; outside CI a
// missing one skips the test.
func lookup(t *testing.T, name string) *proc.User {
	t.Helper()
	u, err := proc.LookupUser(name)
	if err != nil {
		citest.Unavailable(t, "%v (scripts/setup-debian.sh creates it)", err)
	}
	return u
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startCluster makes and starts a cluster in a directory every user can
// traverse, and stops it when the test ends.
func startCluster(t *testing.T, c *Cluster) {
	t.Helper()
	ctx := context.Background()
	d := t.TempDir()
	for _, p := range []string{d, filepath.Dir(d)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c.Dir = filepath.Join(d, "c")
	c.Port = freePort(t)
	if err := c.MakeDirs(); err != nil {
		t.Fatal(err)
	}
	if err := c.Init(ctx, InitOptions{NoSync: true, Settings: map[string]string{"shared_buffers": "16MB"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background(), time.Minute); err != nil {
			t.Error(err)
		}
	})
}

// TestOnlyPgbisectConnects: under both methods, the socket directory is
// 0700 and the server's, unix_socket_permissions is 0700, nothing is
// trusted, pgbisect connects, and another local user (pgbisect-probe)
// cannot, neither through the socket directory nor, with the directory
// opened up (SocketMode 0777), through authentication. The GitHub token in
// pgbisect's environment is in no server process's environment.
func TestOnlyPgbisectConnects(t *testing.T) {
	bin := pgBin(t)
	citest.Root(t, "the servers run as other OS users")
	t.Setenv("GITHUB_TOKEN", testToken)
	probe := lookup(t, "pgbisect-probe")
	for _, tc := range []struct {
		name, user string
		auth       Auth
	}{
		{"password (the results store)", "pgbisect", Password},
		{"peer (the benchmark servers)", proc.BenchUser, Peer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			u := lookup(t, tc.user)
			c := &Cluster{BinDir: bin, User: u, Auth: tc.auth, Superuser: "pgbisect"}
			startCluster(t, c)

			fi, err := os.Stat(c.Socket())
			if err != nil {
				t.Fatal(err)
			}
			if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o700 || st.Uid != u.UID {
				t.Errorf("socket directory: mode %o uid %d, want 0700 and %s's (%d)", fi.Mode().Perm(), st.Uid, u.Name, u.UID)
			}
			hba, err := os.ReadFile(filepath.Join(c.Data(), "pg_hba.conf"))
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(hba), "\n") {
				if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "#") && strings.Contains(line, "trust") {
					t.Errorf("pg_hba.conf trusts: %q", line)
				}
			}

			conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
			if err != nil {
				t.Fatalf("pgbisect cannot connect: %v", err)
			}
			defer conn.Close(ctx)
			for name, want := range map[string]string{"unix_socket_permissions": "0700", "listen_addresses": ""} {
				var got string
				if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}

			// Another local user, through the 0700 directory.
			if out, err := probePsql(ctx, c, probe); err == nil {
				t.Errorf("user %s connected: %s", probe.Name, out)
			} else if !strings.Contains(out, "Permission denied") {
				t.Errorf("user %s was refused, but not by the socket directory: %s", probe.Name, out)
			}
			// With the directory open to everyone, authentication refuses.
			for _, d := range []string{c.Dir, c.Socket()} {
				if err := os.Chmod(d, 0o777); err != nil {
					t.Fatal(err)
				}
			}
			sock := filepath.Join(c.Socket(), ".s.PGSQL."+strconv.Itoa(c.Port))
			if err := os.Chmod(sock, 0o777); err != nil {
				t.Fatal(err)
			}
			out, err := probePsql(ctx, c, probe)
			if err == nil {
				t.Errorf("user %s connected through an open socket: %s", probe.Name, out)
			} else if !strings.Contains(out, "authentication failed") && !strings.Contains(out, "no password supplied") {
				t.Errorf("user %s was refused, but not by authentication: %s", probe.Name, out)
			}
			_ = os.Chmod(c.Socket(), 0o700)
			_ = os.Chmod(c.Dir, 0o700)

			// The server's processes never saw the token.
			pid, _ := c.PID()
			if !c.Ours(pid) {
				t.Fatalf("postmaster.pid names %d, not our server", pid)
			}
			for _, p := range append(Children(pid), pid) {
				env, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/environ")
				if err != nil {
					continue // exited meanwhile
				}
				if strings.Contains(string(env), testToken) {
					t.Errorf("server process %d has the GitHub token in its environment", p)
				}
			}
		})
	}
}

// probePsql runs psql as u against c, with the passfile path but no way
// to read it, and returns its output.
func probePsql(ctx context.Context, c *Cluster, u *proc.User) (string, error) {
	cmd := proc.Command(ctx, u, filepath.Join(c.BinDir, "psql"), "-XAtw", "-c", "SELECT 1")
	cmd.Dir = "/"
	cmd.Env = c.Env("/")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPasswordNeeded: without the passfile, pgbisect's own user is refused
// by a Password cluster.
func TestPasswordNeeded(t *testing.T) {
	bin := pgBin(t)
	var u *proc.User
	if proc.IsRoot() {
		u = lookup(t, "pgbisect")
	}
	c := &Cluster{BinDir: bin, User: u, Auth: Password}
	startCluster(t, c)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(strings.Replace(c.ConnString("postgres"), "passfile=", "passfile=/nonexistent", 1))
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		conn.Close(ctx)
		t.Fatal("connected without the password")
	}
	st, err := os.Stat(c.Passfile())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("passfile mode %o, want 0600", st.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(c.Dir, ".pwfile")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("initdb's password file was left behind: %v", err)
	}
}

func TestReservedSettings(t *testing.T) {
	for _, k := range []string{"listen_addresses", "port", "unix_socket_directories", "unix_socket_permissions", "unix_socket_group",
		"hba_file", "ident_file", "password_encryption", "ssl", "LISTEN_ADDRESSES",
		"include", "include_if_exists", "include_dir", "data_directory", "config_file", "external_pid_file",
		"shared_preload_libraries", "local_preload_libraries", "session_preload_libraries", "dynamic_library_path",
		"archive_command", "restore_command", "archive_library", "ssl_ca_file"} {
		err := CheckSettings(map[string]string{"work_mem": "4MB", k: "x"})
		var re *ReservedError
		if !errors.As(err, &re) || re.Name != k || !strings.Contains(err.Error(), k) {
			t.Errorf("setting %s: got %v, want an error naming it", k, err)
		}
	}
	if err := CheckSettings(map[string]string{"work_mem": "4MB", "shared_buffers": "1GB", "max_wal_size": "4GB"}); err != nil {
		t.Errorf("ordinary settings refused: %v", err)
	}
	c := &Cluster{Dir: t.TempDir(), BinDir: "/nonexistent"}
	err := c.Init(context.Background(), InitOptions{Settings: map[string]string{"listen_addresses": "*"}})
	if err == nil || !strings.Contains(err.Error(), "listen_addresses") {
		t.Errorf("Init with listen_addresses = '*': %v, want a refusal naming it", err)
	}
	// The reproduction: a file the settings include made a
	// benchmark server listen on 127.0.0.1 with trust.
	dir := t.TempDir()
	hba := filepath.Join(dir, "hba.conf")
	conf := filepath.Join(dir, "open.conf")
	if err := os.WriteFile(hba, []byte("host all all 127.0.0.1/32 trust\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("listen_addresses = '127.0.0.1'\nhba_file = '"+hba+"'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"include_if_exists", "include", "include_dir"} {
		err := c.Init(context.Background(), InitOptions{Settings: map[string]string{k: conf}})
		if err == nil || !strings.Contains(err.Error(), "setting "+k+" is pgbisect's own (where the server reads its configuration)") {
			t.Errorf("Init with %s = %s: %v, want a refusal naming it", k, conf, err)
		}
	}
	if Reserved("work_mem") || Reserved("max_wal_size") || Reserved("wal_level") || Reserved("auto_explain.log_min_duration") {
		t.Error("an ordinary setting is reserved")
	}
}

// TestKillChecksThePID: a postmaster.pid naming a process that is not our
// server (a reused pid) is never signalled.
func TestKillChecksThePID(t *testing.T) {
	c := &Cluster{Dir: t.TempDir()}
	if err := os.MkdirAll(c.Data(), 0o700); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	pidFile := strconv.Itoa(other.Process.Pid) + "\n" + c.Data() + "\n"
	if err := os.WriteFile(filepath.Join(c.Data(), "postmaster.pid"), []byte(pidFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if c.Ours(other.Process.Pid) {
		t.Fatal("a sleep process is taken for our server")
	}
	c.Kill()
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("Kill signalled an unrelated process: %v", err)
	}
}

// TestOpenRefusesSymlinkOut: a file the server's user replaced with a
// symlink to a file outside the cluster is not read by pgbisect, and root's
// writes into the cluster do not follow one either.
func TestOpenRefusesSymlinkOut(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: t.TempDir()}
	work := filepath.Join(c.Dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(work, "data.txt")); err != nil {
		t.Fatal(err)
	}
	if b, err := c.ReadFile(filepath.Join(work, "data.txt")); err == nil {
		t.Errorf("read %q through a symlink out of the cluster", b)
	}
	if err := c.WriteFile(work, "data.txt", "overwritten\n", 0o644); err == nil {
		t.Error("wrote through a symlink out of the cluster")
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret\n" {
		t.Errorf("the file outside now holds %q", b)
	}
	// A file outside the cluster's directory is the operator's: opened as is.
	if b, err := c.ReadFile(outside); err != nil || string(b) != "secret\n" {
		t.Errorf("reading a file outside the cluster: %q, %v", b, err)
	}
}

// TestCheckBinDir checks the one test of a server installation (the
// results store's and the benchmark runner's): all three programs, each
// executable, the first missing one named.
func TestCheckBinDir(t *testing.T) {
	if err := CheckBinDir(pgBin(t)); err != nil {
		t.Errorf("PostgreSQL's own bin directory: %v", err)
	}
	dir := t.TempDir()
	for _, p := range []string{"initdb", "pg_ctl"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "postgres"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckBinDir(dir); err == nil || !strings.HasSuffix(err.Error(), "has no postgres") {
		t.Errorf("a postgres that cannot run: %v, want it named", err)
	}
	os.Remove(filepath.Join(dir, "pg_ctl"))
	if err := CheckBinDir(dir); err == nil || !strings.HasSuffix(err.Error(), "has no pg_ctl") {
		t.Errorf("no pg_ctl: %v, want it named", err)
	}
}
