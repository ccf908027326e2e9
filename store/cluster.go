package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"github.com/jackc/pgx/v5"

	"github.com/pgbisect/pgbisect/internal/base/pgcluster"
	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// The private cluster's fixed names. The role and the database are both
// called pgbisect whatever OS user runs the server, so the URL is the same
// on every machine.
const (
	clusterRole = "pgbisect"
	clusterDB   = "pgbisect"
	clusterPort = 5432
	// serverTimeout bounds the server's start and stop (pg_ctl -t).
	serverTimeout = 120 * time.Second
)

// initdbNoSync skips initdb's final fsync (3 s of a 7 s initdb on a busy
// machine). Only the package's own tests set it: a crash right after
// creating a real store must not lose it.
var initdbNoSync bool

// Cluster is pgbisect's private PostgreSQL cluster for the results store,
// kept under StateDir/db and managed by pgcluster (the same manager as the
// benchmark servers):
//
//	db/data/       the data directory
//	db/run/        the unix socket directory, 0700 (no TCP port)
//	db/passfile    the superuser's random password, for clients (0600)
//	db/server.log  the server's log
//
// db/ is mode 0700 and owned by the user that runs the server, which is
// not the benchmark servers' user (config db_run_as and run_as), so a
// scenario's steps cannot reach the socket; and even a process that does
// must give the scram-sha-256 password. The cluster is started on demand
// and left running between pgbisect invocations; "pgbisect db stop" stops
// it. A cluster made by an older pgbisect (trust authentication, another
// owner) is moved to this form by Start.
type Cluster struct {
	// Dir is StateDir/db.
	Dir string
	// User runs initdb and the server when pgbisect is root; nil otherwise.
	User *proc.User
	// BinDir holds initdb, pg_ctl and postgres. Empty means discover it
	// when needed (see FindBinDir).
	BinDir string
	// Log gets progress (initdb, start, stop); nil discards it.
	Log *slog.Logger
}

// NewCluster describes the private cluster under stateDir. When pgbisect is
// root the server runs as runAs (default pgbisect; it must exist);
// otherwise it runs as the current user. Nothing is started.
func NewCluster(stateDir, runAs string, log *slog.Logger) (*Cluster, error) {
	if stateDir == "" {
		return nil, errors.New("private results cluster: no state directory given")
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("private results cluster: %w", err)
	}
	c := &Cluster{Dir: filepath.Join(abs, "db"), Log: log}
	if proc.IsRoot() {
		if runAs == "" {
			runAs = "pgbisect"
		}
		if c.User, err = proc.LookupUser(runAs); err != nil {
			return nil, fmt.Errorf("private results cluster (db_run_as): %w", err)
		}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// pg is the cluster as pgcluster manages it, run as u.
func (c *Cluster) pgAs(u *proc.User) *pgcluster.Cluster {
	return &pgcluster.Cluster{Dir: c.Dir, DataDir: c.DataDir(), SocketDir: c.SocketDir(), LogFile: c.LogFile(),
		Port: clusterPort, BinDir: c.BinDir, User: u, Auth: pgcluster.Password, Superuser: clusterRole}
}

func (c *Cluster) pg() *pgcluster.Cluster { return c.pgAs(c.User) }

// DataDir is the cluster's data directory.
func (c *Cluster) DataDir() string { return filepath.Join(c.Dir, "data") }

// SocketDir is the directory of the server's unix socket.
func (c *Cluster) SocketDir() string { return filepath.Join(c.Dir, "run") }

// LogFile is the server's log.
func (c *Cluster) LogFile() string { return filepath.Join(c.Dir, "server.log") }

// URL is the connection URL of the results database in the cluster, usable
// by pgx and by psql (psql "$(pgbisect db url)"). It names the passfile,
// not the password.
func (c *Cluster) URL() string { return c.pg().URL(clusterDB) }

// ClusterStatus is what Status found.
type ClusterStatus struct {
	// Initialized: the data directory exists.
	Initialized bool
	// Running: a server of this data directory accepts connections.
	Running bool
	// PID is the postmaster's process id when Running.
	PID int
	// Stale: postmaster.pid names a process that is not this cluster's
	// server (it crashed, or the machine rebooted). Start recovers from it.
	Stale bool
	// Version is the PostgreSQL major version of the data directory.
	Version string
	// Err is why a server of ours (PID) does not accept connections:
	// still starting or stopping, or refusing pgbisect.
	Err error
}

// Status inspects the cluster without changing it.
func (c *Cluster) Status(ctx context.Context) (ClusterStatus, error) {
	var st ClusterStatus
	v, err := os.ReadFile(filepath.Join(c.DataDir(), "PG_VERSION"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("reading the results cluster's version: %w", err)
	}
	st.Initialized = true
	st.Version = strings.TrimSpace(string(v))
	pid, err := c.postmasterPID()
	if err != nil || pid == 0 {
		return st, err
	}
	if !c.ours(pid) {
		st.Stale = true
		return st, nil
	}
	st.PID = pid
	if st.Err = c.ping(ctx); st.Err == nil {
		st.Running = true
	}
	return st, nil
}

// postmasterPID reads the first line of postmaster.pid; 0 when there is
// none, -1 when it is torn.
func (c *Cluster) postmasterPID() (int, error) { return c.pg().PID() }

// ours reports whether pid is a live server of this data directory, run
// by the data directory's owner (see pgcluster.Cluster.Ours): a cluster
// that an older pgbisect ran as another user is still recognised, so that
// Start can stop it before moving it.
func (c *Cluster) ours(pid int) bool { return c.pgAs(c.owner()).Ours(pid) }

// owner is the OS user that owns the data directory (c.User when it cannot
// be read).
func (c *Cluster) owner() *proc.User {
	fi, err := os.Stat(c.DataDir())
	if err != nil || c.User == nil {
		return c.User
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == c.User.UID {
		return c.User
	}
	u := &proc.User{UID: st.Uid, GID: st.Gid, Name: strconv.FormatUint(uint64(st.Uid), 10)}
	if ou, err := user.LookupId(u.Name); err == nil {
		if lu, err := proc.LookupUser(ou.Username); err == nil {
			return lu
		}
	}
	return u
}

// connect opens a connection to database db of the cluster, configured
// from the cluster alone: libpq's variables in pgbisect's environment
// (PGPASSWORD, PGHOST, PGSERVICE...) change nothing (pgcluster.ConnConfig).
func (c *Cluster) connect(ctx context.Context, db string) (*pgx.Conn, error) {
	cfg, err := c.pg().ConnConfig(db)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// ping connects to the maintenance database once.
func (c *Cluster) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := c.connect(ctx, "postgres")
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// Start initialises the cluster if it does not exist yet and starts it if it
// is not running, recovering from a stale postmaster.pid. Concurrent calls
// (two pgbisect processes) are serialised by a file lock beside Dir.
func (c *Cluster) Start(ctx context.Context) error {
	unlock, err := c.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()

	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	if st.Initialized {
		if st, err = c.moveOwner(ctx, st); err != nil {
			return err
		}
	}
	if st.Running {
		if err := c.passwordAuth(ctx); err != nil {
			return err
		}
		// A start interrupted after the server came up, before the
		// database was made, is finished now.
		return c.createDatabase(ctx)
	}
	if !st.Initialized {
		if err := c.initdb(ctx); err != nil {
			return err
		}
	} else if st.PID != 0 {
		// A server of ours is starting up, recovering or shutting down.
		return c.waitReady(ctx, st.PID)
	}
	if st.Stale {
		c.Log.Warn("removing a stale postmaster.pid left by a server that is gone", slog.String("dir", c.DataDir()))
		if err := c.removeStale(); err != nil {
			return err
		}
	}
	if err := c.findBinDir(st.Version); err != nil {
		return err
	}
	c.Log.Info("starting the results cluster", slog.String("dir", c.Dir))
	if err := c.pg().MakeDirs(); err != nil {
		return fmt.Errorf("the results cluster: %w", err)
	}
	if err := c.pg().Start(ctx, serverTimeout); err != nil {
		return fmt.Errorf("the results cluster: %w", err)
	}
	if err := c.passwordAuth(ctx); err != nil {
		return err
	}
	return c.createDatabase(ctx)
}

// moveOwner gives a cluster that an older pgbisect ran as another OS user
// (the benchmark servers' user) to c.User: its server is stopped (as its
// owner), every file is given to c.User, and st is read again.
func (c *Cluster) moveOwner(ctx context.Context, st ClusterStatus) (ClusterStatus, error) {
	old := c.owner()
	if c.User == nil || old == nil || old.UID == c.User.UID {
		return st, nil
	}
	c.Log.Warn("moving the results cluster to its own OS user", slog.String("from", old.Name), slog.String("to", c.User.Name))
	if st.PID > 0 {
		if err := c.findBinDir(st.Version); err != nil {
			return st, err
		}
		if err := c.pgAs(old).Stop(ctx, serverTimeout); err != nil {
			return st, fmt.Errorf("moving the results cluster to user %s: %w", c.User.Name, err)
		}
	}
	if err := pgcluster.ChownTree(c.Dir, c.User); err != nil {
		return st, fmt.Errorf("giving the results cluster to user %s: %w", c.User.Name, err)
	}
	return c.Status(ctx)
}

// passwordAuth moves a running cluster that an older pgbisect made with
// trust authentication (it has no passfile) to a random scram-sha-256
// password: the role gets the password over the trusted socket, the
// passfile and the new pg_hba.conf are written, and the server reloads
// them. unix_socket_permissions takes effect at the next start.
func (c *Cluster) passwordAuth(ctx context.Context) error {
	if _, err := os.Stat(c.pg().Passfile()); err == nil {
		return nil
	}
	c.Log.Warn("the results cluster trusts local connections (made by an older pgbisect): giving it a password", slog.String("dir", c.Dir))
	conn, err := c.connect(ctx, "postgres")
	if err != nil {
		return fmt.Errorf("connecting to the results cluster to set its password: %w", err)
	}
	defer conn.Close(ctx)
	pw := pgcluster.NewPassword()
	if _, err := conn.Exec(ctx, "SET password_encryption = 'scram-sha-256'"); err != nil {
		return fmt.Errorf("setting the results cluster's password: %w", err)
	}
	if _, err := conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{clusterRole}.Sanitize()+" PASSWORD "+quoteLiteral(pw)); err != nil {
		return fmt.Errorf("setting the results cluster's password: %w", err)
	}
	p := c.pg()
	if err := p.WritePassfile(pw); err != nil {
		return err
	}
	if err := p.WriteAccess(c.DataDir()); err != nil {
		return err
	}
	conf := "\n# pgbisect: the socket's permissions (since the move to password authentication)\nunix_socket_permissions = 0700\n"
	if err := appendConf(c.DataDir(), conf); err != nil {
		return err
	}
	v, _ := os.ReadFile(filepath.Join(c.DataDir(), "PG_VERSION"))
	if err := c.findBinDir(strings.TrimSpace(string(v))); err != nil {
		return err
	}
	if err := p.Reload(ctx); err != nil {
		return fmt.Errorf("the results cluster: %w", err)
	}
	return nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// appendConf appends to postgresql.conf through os.Root (the data
// directory is the server user's).
func appendConf(dataDir, text string) error {
	root, err := os.OpenRoot(dataDir)
	if err != nil {
		return fmt.Errorf("configuring the results cluster: %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile("postgresql.conf", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("configuring the results cluster: %w", err)
	}
	_, werr := f.WriteString(text)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("configuring the results cluster: %w", err)
	}
	return nil
}

// ensureRunning starts the cluster unless its postmaster is alive. It reads
// only postmaster.pid and /proc, so it is cheap enough to run before every
// new connection.
func (c *Cluster) ensureRunning(ctx context.Context) error {
	if pid, err := c.postmasterPID(); err == nil && c.ours(pid) {
		return nil
	}
	c.Log.Warn("the results cluster is not running; starting it", slog.String("dir", c.Dir))
	return c.Start(ctx)
}

// lock serialises starting and stopping the cluster between processes.
func (c *Cluster) lock(ctx context.Context) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(c.Dir), 0o755); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	l := flock.New(c.Dir + ".lock")
	if _, err := l.TryLockContext(ctx, 100*time.Millisecond); err != nil {
		return nil, fmt.Errorf("locking the results cluster: %w", err)
	}
	return func() { _ = l.Unlock() }, nil
}

// waitReady waits until the server with pid accepts connections or exits.
func (c *Cluster) waitReady(ctx context.Context, pid int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if c.ping(ctx) == nil {
			return c.createDatabase(ctx)
		}
		if !c.ours(pid) {
			return fmt.Errorf("the results cluster's server (pid %d) exited while starting%s", pid, c.logTail())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the results cluster (pid %d) to accept connections: %w%s", pid, ctx.Err(), c.logTail())
		case <-tick.C:
		}
	}
}

// removeStale deletes the lock files of a server that no longer exists:
// postmaster.pid and the socket's lock file, which PostgreSQL would
// otherwise refuse to overwrite if their pid was reused by another process.
func (c *Cluster) removeStale() error {
	files := []string{filepath.Join(c.DataDir(), "postmaster.pid")}
	socks, _ := filepath.Glob(filepath.Join(c.SocketDir(), ".s.PGSQL.*"))
	files = append(files, socks...)
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing stale %s: %w", f, err)
		}
	}
	return nil
}

// Stop shuts the cluster down (fast mode: sessions are disconnected,
// nothing is lost). Stopping a cluster that is not running is not an error.
func (c *Cluster) Stop(ctx context.Context) error {
	if _, err := os.Stat(c.Dir); errors.Is(err, os.ErrNotExist) {
		return nil // never created: nothing to stop, and no lock file to make
	}
	unlock, err := c.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	if st.PID == 0 {
		return nil
	}
	if err := c.findBinDir(st.Version); err != nil {
		return err
	}
	c.Log.Info("stopping the results cluster", slog.String("dir", c.Dir))
	if err := c.pg().Stop(ctx, serverTimeout); err != nil {
		return fmt.Errorf("the results cluster: %w", err)
	}
	return nil
}

// initdb creates the cluster: db/ owned by the server user and closed to
// everyone else, a data directory made in data.new and renamed into place
// only once it is configured, so a crash during initdb leaves nothing that
// looks initialised.
func (c *Cluster) initdb(ctx context.Context) error {
	if err := c.findBinDir(""); err != nil {
		return err
	}
	if err := pgcluster.CheckReachable(filepath.Dir(c.Dir), c.User); err != nil {
		return err
	}
	p := c.pg()
	if err := p.MakeDirs(); err != nil {
		return fmt.Errorf("the results cluster: %w", err)
	}
	tmp := c.DataDir() + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("removing a half-made data directory: %w", err)
	}
	c.Log.Info("creating the results cluster", slog.String("dir", c.Dir), slog.String("bin", c.BinDir))
	err := p.Init(ctx, pgcluster.InitOptions{DataDir: tmp, NoSync: initdbNoSync, Args: []string{"--no-instructions"},
		Settings: map[string]string{"max_connections": "40", "shared_buffers": "64MB"}})
	if err != nil {
		return fmt.Errorf("initialising the results cluster: %w", err)
	}
	if err := os.Rename(tmp, c.DataDir()); err != nil {
		return fmt.Errorf("moving the new data directory into place: %w", err)
	}
	return nil
}

// createDatabase makes the pgbisect database once the server is up.
func (c *Cluster) createDatabase(ctx context.Context) error {
	conn, err := c.connect(ctx, "postgres")
	if err != nil {
		return fmt.Errorf("connecting to the results cluster: %w%s", err, c.logTail())
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", clusterDB).Scan(&exists); err != nil {
		return fmt.Errorf("looking for the results database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{clusterDB}.Sanitize()); err != nil {
		return fmt.Errorf("creating the results database: %w", err)
	}
	return nil
}

// logTail returns the end of the server log, for errors.
func (c *Cluster) logTail() string {
	return "\nserver log (" + c.LogFile() + "):\n" + c.pg().LogTail(20)
}
