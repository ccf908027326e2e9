package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/pgcluster"
	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// superuser is the cluster's bootstrap superuser; initdb is always told so
// that connections do not depend on which OS user ran it.
const superuser = "postgres"

// cluster is one benchmark server's data directory under
// StateDir/clusters/<id>, with its private socket directory and a work
// directory for files the setup generates. The directory handling,
// initdb, access rules and start/stop are pgcluster's (shared with the
// results store); a benchmark cluster authenticates by peer, mapped to
// the superuser for the server's OS user and pgbisect's own only, because
// it must work on every server version (scram-sha-256 needs 10) and
// leaves no password for a shell step to find.
type cluster struct {
	pg      *pgcluster.Cluster
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
	// counterStarts counts the starts under valgrind (counter.go).
	counterStarts int
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
	if err := pgcluster.CheckReachable(abs, u); err != nil {
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
	if len(c.sockDir)+len("/.s.PGSQL.65535") > pgcluster.MaxSocketPath {
		if c.sockDir, err = os.MkdirTemp("", "pgbisect-sock-"); err != nil {
			return nil, fmt.Errorf("creating socket directory: %w", err)
		}
	}
	c.pg = &pgcluster.Cluster{Dir: c.dir, DataDir: c.dataDir, SocketDir: c.sockDir, LogFile: c.logFile,
		Port: port, BinDir: binDir, User: u, Auth: pgcluster.Peer, Superuser: superuser}
	if err := c.pg.MakeDirs(); err != nil {
		c.remove()
		return nil, err
	}
	if err := os.Mkdir(c.workDir, 0o700); err != nil {
		c.remove()
		return nil, fmt.Errorf("creating cluster directory: %w", err)
	}
	if err := proc.Chown(c.workDir, u); err != nil {
		c.remove()
		return nil, fmt.Errorf("giving %s to user %s: %w", c.workDir, u.Name, err)
	}
	// owner.pid says which pgbisect made the cluster (removeStale). It is
	// root's, in the server user's directory: written through os.Root.
	if err := c.pg.WriteFile(c.dir, pgcluster.MarkerFile, strconv.Itoa(os.Getpid())+"\n", 0o644); err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

// initdb creates the data directory with pgcluster's access rules and
// writes the scenario's settings into postgresql.conf.
func (c *cluster) initdb(ctx context.Context, opts []string, settings map[string]string) error {
	return c.pg.Init(ctx, pgcluster.InitOptions{Args: opts, Settings: settings, NoSync: true})
}

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
	c.running = true // even a failed start may leave a postmaster to stop
	return c.pg.Start(ctx, timeout)
}

// stop stops the server with pg_ctl (fast mode). If that fails or the
// context ends, the server is killed.
func (c *cluster) stop(ctx context.Context, timeout time.Duration) error {
	if !c.running {
		return nil
	}
	if err := c.pg.Stop(ctx, timeout); err != nil {
		c.running = false
		return err
	}
	c.running = false
	return nil
}

// kill stops the server without asking (see pgcluster.Cluster.Kill, which
// first checks that postmaster.pid names our server).
func (c *cluster) kill() {
	c.pg.Kill()
	c.running = false
}

// postmasterPID reads the first line of postmaster.pid, or returns 0.
func (c *cluster) postmasterPID() int {
	pid, _ := c.pg.PID()
	if pid < 0 {
		return 0
	}
	return pid
}

func children(ppid int) []int { return pgcluster.Children(ppid) }

func procStat(pid int) (state byte, ppid int, ok bool) { return pgcluster.ProcStat(pid) }

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

// env is the environment of every program run against the cluster (see
// pgcluster.Cluster.Env), with the work directory as HOME.
func (c *cluster) env() []string { return c.pg.Env(c.workDir) }

// logTail returns the last n lines of the server log.
func (c *cluster) logTail(n int) string { return c.pg.LogTail(n) }

// removeStale removes clusters left under stateDir by a pgbisect process
// that no longer runs (killed before it could clean up), stopping any
// server still running in them.
func removeStale(stateDir string, u *proc.User) {
	root := filepath.Join(stateDir, "clusters")
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, pgcluster.MarkerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		c := &cluster{dir: dir, dataDir: filepath.Join(dir, "data"), running: true,
			pg: &pgcluster.Cluster{Dir: dir, User: u}}
		c.remove()
	}
}
