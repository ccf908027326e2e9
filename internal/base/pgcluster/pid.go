package pgcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PID reads the first line of the data directory's postmaster.pid: 0 when
// there is none, -1 when it is torn (a crash while writing it).
func (c *Cluster) PID() (int, error) {
	data, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading postmaster.pid: %w", err)
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil || pid <= 1 {
		return -1, nil
	}
	return pid, nil
}

// Ours reports whether pid is a live postmaster of this data directory.
// postmaster.pid is written by the server's user, and a pid is reused
// after a crash or a reboot, so pgbisect (root) never signals a pid from
// it without this check: the process must be running (not a zombie), run
// as the server's user, and work in this data directory (a postmaster
// chdirs into it).
func (c *Cluster) Ours(pid int) bool {
	if pid <= 1 {
		return false
	}
	st, _, ok := ProcStat(pid)
	if !ok || st == 'Z' || st == 'X' {
		return false
	}
	if c.User != nil {
		fi, err := os.Stat("/proc/" + strconv.Itoa(pid))
		if err != nil {
			return false
		}
		if s, ok := fi.Sys().(*syscall.Stat_t); ok && s.Uid != c.User.UID && os.Geteuid() == 0 {
			return false
		}
	}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return false
	}
	want, err := filepath.EvalSymlinks(c.dataDir())
	if err != nil {
		return false
	}
	return cwd == want
}

// Kill stops the server without asking, for use after a cancellation (it
// needs no context), and only when postmaster.pid names a server of ours
// (see Ours). pg_ctl starts the postmaster in a session of its own and
// every server process calls setsid(), so there is no process group to
// kill: SIGQUIT asks the postmaster for an immediate shutdown of all its
// children; whatever still runs after a grace period gets SIGKILL. It
// returns when the postmaster and its children are gone.
func (c *Cluster) Kill() {
	pid, _ := c.PID()
	if !c.Ours(pid) {
		return
	}
	family := append(Children(pid), pid)
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	if waitGone(family, 5*time.Second) {
		return
	}
	family = append(family, Children(pid)...)
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
			if st, _, ok := ProcStat(p); ok && st != 'Z' && st != 'X' {
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

// Children lists the running processes whose parent is ppid.
func Children(ppid int) []int {
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
		if st, parent, ok := ProcStat(pid); ok && parent == ppid && st != 'Z' {
			kids = append(kids, pid)
		}
	}
	return kids
}

// ProcStat returns a process's state and parent from /proc.
func ProcStat(pid int) (state byte, ppid int, ok bool) {
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
