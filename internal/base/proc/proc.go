// Package proc starts the child processes pgbisect depends on (make,
// initdb, pg_ctl, postgres, pgbench) so that none outlives its caller.
//
// Every child runs in its own process group and the whole group is killed
// when the context is cancelled, so a Ctrl-C never leaves a compiler or a
// server behind. When pgbisect runs as root, PostgreSQL refuses to start;
// such children are run as an unprivileged user (User.Credential).
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
	"time"
)

// WaitDelay is how long a cancelled child's process group has to exit after
// SIGTERM before it is sent SIGKILL.
const WaitDelay = 10 * time.Second

// User is an account that children can run as.
type User struct {
	Name string
	UID  uint32
	GID  uint32
	Home string
	// Groups are the user's own supplementary groups (from the group
	// database). A child run as the user gets exactly these, never root's.
	Groups []uint32
}

// BenchUser is the account builds, benchmark servers and client tools run
// as when pgbisect is root and the config names no other (run_as). It is
// pgbisect's own and owns nothing else: never Debian's postgres, which
// owns the system cluster and is its superuser over the peer socket.
// scripts/setup-debian.sh creates it.
const BenchUser = "pgbisect-bench"

// IsRoot reports whether pgbisect runs with uid 0.
func IsRoot() bool { return os.Geteuid() == 0 }

// LookupUser finds a local account by name.
func LookupUser(name string) (*User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("user %q does not exist: create it (useradd --system --create-home %s) or set run_as to an existing unprivileged user: %w", name, name, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q: bad uid %q", name, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q: bad gid %q", name, u.Gid)
	}
	if uid == 0 {
		return nil, fmt.Errorf("user %q is root; PostgreSQL refuses to run as root: name an unprivileged user", name)
	}
	pu := &User{Name: name, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil && g != 0 {
				pu.Groups = append(pu.Groups, uint32(g))
			}
		}
	}
	return pu, nil
}

// Command returns a command that runs in its own process group, is killed
// with that group when ctx is done, and runs as u when u is not nil and
// pgbisect is root, with the allowlisted environment Env() (never the GitHub
// token or a database password). u is ignored when pgbisect is not root (it then runs
// everything as itself).
func Command(ctx context.Context, u *User, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	// Allowlisted by default (see Env); callers add to it or replace it.
	cmd.Env = Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if u != nil && IsRoot() {
		cmd.SysProcAttr.Credential = u.Credential()
	}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		// Negative pid: the whole process group.
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		go func(pid int) {
			time.Sleep(WaitDelay / 2)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}(cmd.Process.Pid)
		return err
	}
	cmd.WaitDelay = WaitDelay
	return cmd
}

// Credential is what a child run as u gets: its uid, its gid and its own
// supplementary groups. The groups are set explicitly (setgroups), so root's
// groups are dropped even when u has none (an empty, non-nil list).
func (u *User) Credential() *syscall.Credential {
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: append([]uint32{}, u.Groups...)}
}

// Chown gives path to u when pgbisect is root; it does nothing otherwise.
func Chown(path string, u *User) error {
	if u == nil || !IsRoot() {
		return nil
	}
	return os.Chown(path, int(u.UID), int(u.GID))
}
