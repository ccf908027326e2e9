package build

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killStrays kills processes left running in dir by a pgbisect that died
// without cleaning up (killed by a test timeout or SIGKILL, its children
// kept compiling or configuring and would write into the worktree the new
// lock holder is using). The caller holds the worktree lock, so nothing
// legitimate runs there. It returns how many processes it killed.
func killStrays(dir string) int {
	self := os.Getpid()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || (cwd != dir && !strings.HasPrefix(cwd, dir+"/")) {
			continue
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Wait (briefly) until they are gone so they write nothing more.
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for time.Now().Before(deadline) {
			if err := syscall.Kill(pid, 0); err != nil {
				break
			}
			if stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil && strings.Contains(string(stat), ") Z ") {
				break // a zombie writes nothing
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return len(pids)
}
