package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgbisect/pgbisect/internal/proc"
)

// superuser is the cluster's bootstrap superuser; initdb is always told so
// that connections do not depend on which OS user ran it.
const superuser = "postgres"

// maxSocketPath is the longest unix socket path Linux accepts (sun_path).
const maxSocketPath = 107

// cluster is one PostgreSQL data directory under StateDir/clusters/<id>,
// with its private socket directory and a work directory for files the
// setup generates. It is started and stopped with the target's pg_ctl.
type cluster struct {
	id      string
	dir     string // StateDir/clusters/<id>
	dataDir string
	workDir string
	sockDir string // dir/sock, or a short directory under /tmp when that is too long
	logFile string
	port    int
	binDir  string
	user    *proc.User // nil when not root
	running bool
	setupOK bool // setup steps ran on this cluster
	lastUse int  // Runner.uses when a sample last ran on it
}

// newCluster creates the directories of a new cluster (no initdb yet).
func newCluster(stateDir, binDir string, u *proc.User) (*cluster, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
	root := filepath.Join(stateDir, "clusters")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("creating cluster directory: %w", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if err := checkTraversable(abs, u); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c := &cluster{id: id, dir: filepath.Join(abs, id), binDir: binDir, user: u, port: port}
	c.dataDir = filepath.Join(c.dir, "data")
	c.workDir = filepath.Join(c.dir, "work")
	c.logFile = filepath.Join(c.dir, "server.log")
	c.sockDir = filepath.Join(c.dir, "sock")
	if len(c.sockDir)+len("/.s.PGSQL.65535") > maxSocketPath {
		c.sockDir = ""
	}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cluster directory: %w", err)
	}
	dirs := []string{c.workDir}
	if c.sockDir != "" {
		dirs = append(dirs, c.sockDir)
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			c.remove()
			return nil, fmt.Errorf("creating cluster directory: %w", err)
		}
	}
	if c.sockDir == "" {
		if c.sockDir, err = os.MkdirTemp("", "pgbisect-sock-"); err != nil {
			c.remove()
			return nil, fmt.Errorf("creating socket directory: %w", err)
		}
		_ = os.Chmod(c.sockDir, 0o755)
	}
	for _, d := range []string{c.dir, c.workDir, c.sockDir} {
		if err := proc.Chown(d, u); err != nil {
			c.remove()
			return nil, fmt.Errorf("giving %s to user %s: %w", d, u.Name, err)
		}
	}
	if err := os.WriteFile(filepath.Join(c.dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

// checkTraversable fails clearly when the server's user cannot reach dir,
// which initdb would otherwise report as a bare "permission denied".
func checkTraversable(dir string, u *proc.User) error {
	if u == nil || !proc.IsRoot() {
		return nil
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		var canX bool
		switch {
		case !ok:
			canX = true
		case st.Uid == u.UID:
			canX = mode&0o100 != 0
		case st.Gid == u.GID:
			canX = mode&0o010 != 0
		default:
			canX = mode&0o001 != 0
		}
		if !canX {
			return fmt.Errorf("user %s cannot reach %s: directory %s has mode %04o; make it traversable (chmod o+x %s) or use a state directory outside it", u.Name, dir, d, mode, d)
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

func (c *cluster) bin(name string) string { return filepath.Join(c.binDir, name) }

// initdb creates the data directory and writes the scenario's settings and
// the private connection settings into postgresql.conf.
func (c *cluster) initdb(ctx context.Context, opts []string, settings map[string]string) error {
	args := append([]string{"-D", c.dataDir}, initdbFlags...)
	args = append(args, opts...)
	if out, err := c.run(ctx, c.bin("initdb"), args...); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, tail(out, 20))
	}
	var b strings.Builder
	b.WriteString("\n# Added by pgbisect: a private server.\n")
	fmt.Fprintf(&b, "port = %d\nlisten_addresses = ''\nunix_socket_directories = %s\n", c.port, quoteGUC(c.sockDir))
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		b.WriteString("# The scenario's settings.\n")
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, quoteGUC(settings[k]))
	}
	f, err := os.OpenFile(filepath.Join(c.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("writing postgresql.conf: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("writing postgresql.conf: %w", err)
	}
	return f.Close()
}

func quoteGUC(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

// freePort returns a TCP port nobody listens on. The server does not
// listen on TCP (listen_addresses is empty), but the port names its socket and
// its shared memory key, so a free one avoids clashing with any server.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start starts the server with pg_ctl and waits until it accepts
// connections. On failure the error carries the server log's tail.
func (c *cluster) start(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	secs := strconv.Itoa(int(timeout.Seconds()))
	c.running = true // even a failed start may leave a postmaster to stop
	out, err := c.run(ctx, c.bin("pg_ctl"), "-D", c.dataDir, "-l", c.logFile, "-w", "-t", secs, "start")
	if err != nil {
		return fmt.Errorf("starting the server: %w\n%s\nserver log (%s):\n%s", err, tail(out, 5), c.logFile, c.logTail(30))
	}
	return nil
}

// stop stops the server with pg_ctl (fast mode). If that fails or the
// context ends, the server is killed.
func (c *cluster) stop(ctx context.Context, timeout time.Duration) error {
	if !c.running {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	out, err := c.run(sctx, c.bin("pg_ctl"), "-D", c.dataDir, "-m", "fast", "-w", "-t", strconv.Itoa(int(timeout.Seconds())), "stop")
	if err != nil {
		c.kill()
		return fmt.Errorf("stopping the server: %w\n%s\nserver log (%s):\n%s", err, tail(out, 5), c.logFile, c.logTail(20))
	}
	c.running = false
	return nil
}

// kill stops the server without asking, for use after a cancellation (it
// needs no context). pg_ctl starts the postmaster in a session of its own
// and every server process calls setsid(), so there is no process group to
// kill: SIGQUIT asks the postmaster for an immediate shutdown of all its
// children; whatever still runs after a grace period gets SIGKILL. It
// returns when the postmaster and its children are gone.
func (c *cluster) kill() {
	defer func() { c.running = false }()
	pid := c.postmasterPID()
	if pid <= 0 {
		return
	}
	family := append(children(pid), pid)
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	if waitGone(family, 5*time.Second) {
		return
	}
	family = append(family, children(pid)...)
	for _, p := range family {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	waitGone(family, 30*time.Second)
}

// waitGone waits until none of pids runs (zombies count as gone) and
// reports whether that happened within timeout.
func waitGone(pids []int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		alive := false
		for _, p := range pids {
			if st, _, ok := procStat(p); ok && st != 'Z' && st != 'X' {
				alive = true
				break
			}
		}
		if !alive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// postmasterPID reads the first line of postmaster.pid, or returns 0.
func (c *cluster) postmasterPID() int {
	b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 1 {
		return 0
	}
	return pid
}

// children lists the running processes whose parent is ppid.
func children(ppid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, parent, ok := procStat(pid); ok && parent == ppid && st != 'Z' {
			kids = append(kids, pid)
		}
	}
	return kids
}

// procStat returns a process's state and parent from /proc.
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid pgrp ...; comm may contain spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	pp, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pp, true
}

// remove deletes the cluster's directories. The server must be stopped.
func (c *cluster) remove() {
	if c.running {
		c.kill()
	}
	_ = os.RemoveAll(c.dir)
	if c.sockDir != "" && !strings.HasPrefix(c.sockDir, c.dir+string(filepath.Separator)) {
		_ = os.RemoveAll(c.sockDir)
	}
}

// run runs a PostgreSQL program as the server's user and returns its
// combined output.
func (c *cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := proc.Command(ctx, c.user, name, args...)
	cmd.Dir = c.dir
	cmd.Env = c.env()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.Bytes(), fmt.Errorf("%s: %w", filepath.Base(name), context.Cause(ctx))
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.Bytes(), fmt.Errorf("%s exited with %v", filepath.Base(name), ee.ProcessState)
		}
		return out.Bytes(), err
	}
	return out.Bytes(), nil
}

// env is the environment of every program run against the cluster:
// connection defaults for libpq clients, C locale, and a HOME the server's
// user can read.
func (c *cluster) env() []string {
	env := []string{
		"PGHOST=" + c.sockDir,
		"PGPORT=" + strconv.Itoa(c.port),
		"PGUSER=" + superuser,
		"PGDATABASE=postgres",
		"PGDATA=" + c.dataDir,
		"LC_ALL=C",
		"PATH=" + c.binDir + ":/usr/local/bin:/usr/bin:/bin",
	}
	home := c.workDir
	env = append(env, "HOME="+home)
	if tz := os.Getenv("TZ"); tz != "" {
		env = append(env, "TZ="+tz)
	}
	return env
}

// logTail returns the last n lines of the server log.
func (c *cluster) logTail(n int) string {
	b, err := os.ReadFile(c.logFile)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	return tail(b, n)
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	s := strings.TrimRight(string(b), "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// removeStale removes clusters left under stateDir by a pgbisect process
// that no longer runs (killed before it could clean up), stopping any
// server still running in them.
func removeStale(stateDir string) {
	root := filepath.Join(stateDir, "clusters")
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		c := &cluster{dir: dir, dataDir: filepath.Join(dir, "data"), running: true}
		c.remove()
	}
}
