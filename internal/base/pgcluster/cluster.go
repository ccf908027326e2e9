// Package pgcluster creates, starts and stops the private PostgreSQL
// clusters pgbisect runs: the results store and the benchmark servers.
//
// The one design choice: only pgbisect reaches a cluster, at two levels.
// The server listens on no TCP port and its unix socket lives in a
// directory of mode SocketMode (0700) owned by the server's OS user, with
// unix_socket_permissions to match, so no other local user reaches the
// socket; and the server still asks who connects: a random scram-sha-256
// password that clients read from a passfile (Password), or peer
// authentication mapped to the superuser for named OS users only (Peer).
// Nothing is trusted. The store and the benchmark servers run as
// different OS users, so a benchmark's shell or SQL step cannot reach the
// store's socket. A scenario cannot loosen any of it: Reserved names the
// settings the cluster owns.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// Auth is how clients prove who they are.
type Auth string

const (
	// Password: scram-sha-256 with a random password made at initdb and
	// kept in Passfile (mode 0600, owned by the server's user). Needs
	// PostgreSQL 10 or newer.
	Password Auth = "scram-sha-256"
	// Peer: the connecting process's OS user must be the server's user or
	// pgbisect's own (or one of PeerUsers); it is mapped to Superuser.
	// Works on every version pgbisect benchmarks (9.3 on).
	Peer Auth = "peer"
)

// MaxSocketPath is the longest unix socket path Linux accepts (sun_path - 1).
const MaxSocketPath = 107

// Cluster is one data directory with its socket directory. The zero
// values of the optional fields are the safe ones.
type Cluster struct {
	// Dir holds the passfile and, by default, everything else. It is made
	// mode 0700 and owned by User.
	Dir string
	// DataDir is the data directory (default Dir/data).
	DataDir string
	// SocketDir is the directory of the unix socket (default Dir/sock).
	SocketDir string
	// LogFile is the server's log (default Dir/server.log).
	LogFile string
	// Port names the socket (.s.PGSQL.<port>); no TCP port is opened.
	Port int
	// BinDir holds initdb, pg_ctl and postgres.
	BinDir string
	// User runs initdb and the server when pgbisect is root; nil otherwise
	// (everything then runs as pgbisect's own user).
	User *proc.User
	// Auth is the authentication method (default Password).
	Auth Auth
	// SocketMode is the socket directory's mode and the server's
	// unix_socket_permissions (default 0700).
	SocketMode os.FileMode
	// Superuser is the bootstrap superuser's role name (default postgres).
	Superuser string
	// PeerUsers are further OS users that Peer admits.
	PeerUsers []string
	// Postgres is the server executable Start has pg_ctl run (pg_ctl -p):
	// a wrapper that starts BinDir/postgres under a counter such as
	// valgrind. Default: BinDir/postgres.
	Postgres string
}

func (c *Cluster) dataDir() string {
	if c.DataDir != "" {
		return c.DataDir
	}
	return filepath.Join(c.Dir, "data")
}

// Data is the data directory.
func (c *Cluster) Data() string { return c.dataDir() }

// Socket is the socket directory.
func (c *Cluster) Socket() string {
	if c.SocketDir != "" {
		return c.SocketDir
	}
	return filepath.Join(c.Dir, "sock")
}

// Log is the server's log file.
func (c *Cluster) Log() string {
	if c.LogFile != "" {
		return c.LogFile
	}
	return filepath.Join(c.Dir, "server.log")
}

// Role is the superuser's role name.
func (c *Cluster) Role() string {
	if c.Superuser != "" {
		return c.Superuser
	}
	return "postgres"
}

func (c *Cluster) auth() Auth {
	if c.Auth == "" {
		return Password
	}
	return c.Auth
}

func (c *Cluster) socketMode() os.FileMode {
	if c.SocketMode == 0 {
		return 0o700
	}
	return c.SocketMode
}

// Passfile is the libpq password file clients use (Password only).
func (c *Cluster) Passfile() string { return filepath.Join(c.Dir, "passfile") }

// MakeDirs creates Dir (0700) and the socket directory (SocketMode), both
// owned by User, and puts right the mode and owner of ones that exist.
func (c *Cluster) MakeDirs() error {
	sock := c.Socket()
	if n := len(filepath.Join(sock, ".s.PGSQL."+strconv.Itoa(c.Port))); n > MaxSocketPath {
		return fmt.Errorf("the socket path under %s is %d bytes, longer than the %d unix sockets allow: choose a shorter state_dir", sock, n, MaxSocketPath)
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{c.Dir, 0o700}, {sock, c.socketMode()}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return fmt.Errorf("creating %s: %w", d.path, err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return fmt.Errorf("creating %s: %w", d.path, err)
		}
		if err := proc.Chown(d.path, c.User); err != nil {
			return fmt.Errorf("giving %s to user %s: %w", d.path, c.User.Name, err)
		}
	}
	return nil
}

// CheckBinDir reports whether dir holds a PostgreSQL server: initdb,
// pg_ctl and postgres, each an executable file. The error names the first
// one missing.
func CheckBinDir(dir string) error {
	for _, p := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s has no %s", dir, p)
		}
	}
	return nil
}

// InitOptions are what Init adds to initdb and postgresql.conf.
type InitOptions struct {
	// DataDir overrides the data directory to create (the store makes it
	// under another name and renames it into place).
	DataDir string
	// Args are further initdb options.
	Args []string
	// Settings go to postgresql.conf after the cluster's own. None may be
	// Reserved.
	Settings map[string]string
	// NoSync skips initdb's final fsync.
	NoSync bool
}

// Init runs initdb and writes the access rules and the cluster's own
// settings. MakeDirs must have run.
func (c *Cluster) Init(ctx context.Context, o InitOptions) error {
	if err := CheckSettings(o.Settings); err != nil {
		return err
	}
	data := o.DataDir
	if data == "" {
		data = c.dataDir()
	}
	var password, pwfile string
	switch c.auth() {
	case Password:
		password = newPassword()
		// initdb reads the password from a file of the server's user;
		// it is removed once initdb is done.
		pwfile = filepath.Join(c.Dir, ".pwfile")
		if err := c.writeFile(c.Dir, ".pwfile", password+"\n", 0o600, false); err != nil {
			return err
		}
		defer os.Remove(pwfile)
	case Peer:
	default:
		return fmt.Errorf("unknown authentication method %q", c.Auth)
	}
	args := c.InitdbArgs(data, pwfile, o.NoSync)
	args = append(args, o.Args...)
	if out, err := c.Run(ctx, "initdb", args...); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, proc.Tail(string(out), 20))
	}
	if err := c.WriteAccess(data); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("\n# Added by pgbisect: a private server that only pgbisect reaches.\n")
	fmt.Fprintf(&b, "port = %d\nlisten_addresses = ''\nunix_socket_directories = %s\nunix_socket_permissions = 0%o\n",
		c.Port, QuoteGUC(c.Socket()), c.socketMode())
	if len(o.Settings) > 0 {
		b.WriteString("# The caller's settings.\n")
		keys := make([]string, 0, len(o.Settings))
		for k := range o.Settings {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s = %s\n", k, QuoteGUC(o.Settings[k]))
		}
	}
	if err := c.writeFile(data, "postgresql.conf", b.String(), 0, true); err != nil {
		return err
	}
	if password != "" {
		return c.WritePassfile(password)
	}
	return nil
}

// InitdbArgs are the initdb options of a cluster: ones every initdb from
// 9.3 on accepts (bench/testdata/versions.txt), except --pwfile with
// scram-sha-256 (Password), which needs 10. -N skips the final fsync;
// initdb 10 calls it --no-sync and 9.x --nosync, so only the short form
// works for both.
func (c *Cluster) InitdbArgs(data, pwfile string, noSync bool) []string {
	args := []string{"-D", data, "-U", c.Role(), "-E", "UTF8", "--locale=C"}
	switch c.auth() {
	case Password:
		args = append(args, "-A", "scram-sha-256", "--pwfile="+pwfile)
	case Peer:
		args = append(args, "-A", "peer")
	}
	if noSync {
		args = append(args, "-N")
	}
	return args
}

// writeFile writes name in dir, a directory the server's user owns,
// through os.Root: a symlink planted anywhere under dir cannot redirect a
// write by root outside it. The file is given to User.
func (c *Cluster) writeFile(dir, name, content string, perm os.FileMode, appendTo bool) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	defer root.Close()
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendTo {
		flag = os.O_WRONLY | os.O_APPEND
	}
	f, err := root.OpenFile(name, flag, perm)
	if err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	_, werr := f.WriteString(content)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	if !appendTo && c.User != nil && proc.IsRoot() {
		if err := root.Lchown(name, int(c.User.UID), int(c.User.GID)); err != nil {
			return fmt.Errorf("giving %s to %s: %w", filepath.Join(dir, name), c.User.Name, err)
		}
	}
	return nil
}

// WriteFile writes a file into a directory of the cluster through os.Root
// (see writeFile); the file belongs to the server's user.
func (c *Cluster) WriteFile(dir, name, content string, perm os.FileMode) error {
	return c.writeFile(dir, name, content, perm, false)
}

// Env is the environment of every program run against the cluster, built
// from nothing: connection defaults for libpq, C locale, a PATH with
// BinDir first, and HOME.
func (c *Cluster) Env(home string) []string {
	env := []string{
		"PGHOST=" + c.Socket(),
		"PGPORT=" + strconv.Itoa(c.Port),
		"PGUSER=" + c.Role(),
		"PGDATABASE=postgres",
		"PGDATA=" + c.dataDir(),
		"LC_ALL=C",
		"PATH=" + c.BinDir + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
	}
	if c.auth() == Password {
		env = append(env, "PGPASSFILE="+c.Passfile())
	}
	if c.User != nil && proc.IsRoot() {
		env = append(env, "USER="+c.User.Name, "LOGNAME="+c.User.Name)
	}
	if tz := os.Getenv("TZ"); tz != "" {
		env = append(env, "TZ="+tz)
	}
	return env
}

// Run runs a PostgreSQL program of BinDir as the server's user, in Dir,
// with Env, and returns its combined output.
func (c *Cluster) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := proc.Command(ctx, c.User, filepath.Join(c.BinDir, name), args...)
	cmd.Dir = c.Dir
	cmd.Env = c.Env(c.Dir)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.Bytes(), fmt.Errorf("%s: %w", name, context.Cause(ctx))
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.Bytes(), fmt.Errorf("%s exited with %v", name, ee.ProcessState)
		}
		return out.Bytes(), err
	}
	return out.Bytes(), nil
}

// Start starts the server with pg_ctl and waits up to timeout until it
// accepts connections. The error carries the server log's tail.
func (c *Cluster) Start(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	args := []string{"-D", c.dataDir(), "-l", c.Log(), "-w", "-t", strconv.Itoa(int(timeout.Seconds()))}
	if c.Postgres != "" {
		args = append(args, "-p", c.Postgres)
	}
	out, err := c.Run(ctx, "pg_ctl", append(args, "start")...)
	if err != nil {
		return fmt.Errorf("starting the server: %w\n%s\nserver log (%s):\n%s", err, proc.Tail(string(out), 5), c.Log(), c.LogTail(30))
	}
	return nil
}

// Stop stops the server with pg_ctl in fast mode. When that fails, a
// server that is still ours is killed (see Kill).
func (c *Cluster) Stop(ctx context.Context, timeout time.Duration) error {
	sctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	out, err := c.Run(sctx, "pg_ctl", "-D", c.dataDir(), "-m", "fast", "-w", "-t", strconv.Itoa(int(timeout.Seconds())), "stop")
	if err != nil {
		c.Kill()
		return fmt.Errorf("stopping the server: %w\n%s\nserver log (%s):\n%s", err, proc.Tail(string(out), 5), c.Log(), c.LogTail(20))
	}
	return nil
}

// Reload makes the server read its configuration files again.
func (c *Cluster) Reload(ctx context.Context) error {
	if out, err := c.Run(ctx, "pg_ctl", "-D", c.dataDir(), "reload"); err != nil {
		return fmt.Errorf("reloading the server: %w\n%s", err, proc.Tail(string(out), 5))
	}
	return nil
}

// LogTail returns the last n lines of the server log.
func (c *Cluster) LogTail(n int) string {
	b, err := c.ReadFile(c.Log())
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	return proc.Tail(string(b), n)
}

// ChownTree gives every file under dir that is not u's to u (an existing
// cluster moving to another OS user). It does nothing unless pgbisect is
// root.
func ChownTree(dir string, u *proc.User) error {
	if u == nil || !proc.IsRoot() {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Uid != u.UID || st.Gid != u.GID) {
			return os.Lchown(p, int(u.UID), int(u.GID))
		}
		return nil
	})
}

// CheckReachable fails clearly when u cannot traverse dir and every
// directory above it, which initdb and the server need and would otherwise
// report as a bare "permission denied". It checks nothing unless pgbisect
// is root (everything then runs as one user).
func CheckReachable(dir string, u *proc.User) error {
	if u == nil || !proc.IsRoot() {
		return nil
	}
	gids := map[uint32]bool{u.GID: true}
	for _, g := range u.Groups {
		gids[g] = true
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("checking %s: %w", d, err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			perm := fi.Mode().Perm()
			var can bool
			switch {
			case st.Uid == u.UID:
				can = perm&0o100 != 0
			case gids[st.Gid]:
				can = perm&0o010 != 0
			default:
				can = perm&0o001 != 0
			}
			if !can {
				return fmt.Errorf("user %s cannot reach %s: directory %s has mode %04o; make it traversable (chmod o+x %s) or choose a state_dir it can reach",
					u.Name, dir, d, perm, d)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// Open opens a file for pgbisect (root) to read. A file under Dir, which
// the server's user owns and anything it runs can change, is opened
// through os.Root: a symlink planted there cannot make root read a file
// outside the cluster (and hand it to the server or put it in a report).
func (c *Cluster) Open(path string) (*os.File, error) {
	rel, err := filepath.Rel(c.Dir, path)
	if err != nil || !filepath.IsLocal(rel) {
		return os.Open(path)
	}
	root, err := os.OpenRoot(c.Dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.Open(rel)
}

// ReadFile reads a file as Open opens it.
func (c *Cluster) ReadFile(path string) ([]byte, error) {
	f, err := c.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
