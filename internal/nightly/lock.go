package nightly

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
)

// LockFile is the name of the machine lock in the state directory, where
// it is with PGBISECT_MACHINE_LOCK=state.
const LockFile = "lock"

// DefaultMachineLock is the machine lock: one per machine, so two state
// directories on one host (two daemons, a daemon and a person's 'pgbisect
// compare') never benchmark at the same time.
const DefaultMachineLock = "/run/lock/pgbisect-machine.lock"

// MachineLockEnv moves the machine lock: a path, or "state" for a lock per
// state directory (tests that run many state directories at once).
const MachineLockEnv = "PGBISECT_MACHINE_LOCK"

// MachineLockPath is the path of the machine lock for stateDir.
func MachineLockPath(stateDir string) string {
	switch v := os.Getenv(MachineLockEnv); v {
	case "":
		if err := os.MkdirAll(filepath.Dir(DefaultMachineLock), 0o755); err != nil {
			return filepath.Join(os.TempDir(), filepath.Base(DefaultMachineLock))
		}
		return DefaultMachineLock
	case "state":
		return filepath.Join(stateDir, LockFile)
	default:
		return v
	}
}

// Holder describes the process holding a lock; it is written into the lock
// file so that whoever finds the machine busy can say who is using it.
type Holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Started time.Time `json:"started"`
}

func (h Holder) String() string {
	if h.PID == 0 {
		return "another process (it has not written its name yet)"
	}
	return fmt.Sprintf("pid %d (%s) since %s (%s ago)", h.PID, h.Command,
		h.Started.Local().Format("2006-01-02 15:04:05 MST"), time.Since(h.Started).Round(time.Second))
}

// BusyError is returned by LockMachine when another process holds the lock
// and the caller did not ask to wait.
type BusyError struct {
	Path   string
	Holder Holder
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("the machine is busy: %s holds %s; benchmarks must not overlap, so wait for it to finish (or pass --wait), or stop it", e.Holder, e.Path)
}

// lockPoll is how often a waiting LockMachine retries.
const lockPoll = 500 * time.Millisecond

// held counts this process's holds of each lock path. flock(2) locks of
// two open files conflict even within one process, so without it a daemon
// job that calls code which also locks the machine would wait for itself.
var held = struct {
	sync.Mutex
	m map[string]*hold
}{m: map[string]*hold{}}

type hold struct {
	n int
	f *flock.Flock
}

// LockMachine takes the machine lock (MachineLockPath) that keeps benchmarks
// from overlapping: the daemon holds it while it runs a job, and `pgbisect
// run`, `compare` and `bisect` hold it while they build and measure. With
// wait it waits until the lock is free or ctx is done; without, it returns
// a *BusyError naming the holder. A caller that wants to say "waiting for
// ..." calls it first without wait, prints the BusyError's Holder, then
// calls it again with wait.
//
// The lock is held by this process until unlock is called, and nested calls
// in one process share it. It is an flock(2) lock, so it is released when
// the process dies, however it dies.
func LockMachine(ctx context.Context, stateDir string, wait bool) (unlock func(), err error) {
	return lockFile(ctx, MachineLockPath(stateDir), wait, true)
}

// lockFile takes the flock at path. With nested, a second hold by this
// process shares the first; without, it is refused like any other holder's.
func lockFile(ctx context.Context, path string, wait, nested bool) (unlock func(), err error) {
	held.Lock()
	defer held.Unlock()
	if h := held.m[path]; h != nil {
		if !nested {
			return nil, &BusyError{Path: path, Holder: ReadHolder(path)}
		}
		h.n++
		return releaser(path), nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating the state directory for the machine lock: %w", err)
	}
	f := flock.New(path, flock.SetPermissions(0o644))
	ok, err := f.TryLock()
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if !ok && wait {
		// Waiting must not hold held's mutex: another goroutine of this
		// process may be releasing the lock we wait for.
		held.Unlock()
		ok, err = f.TryLockContext(ctx, lockPoll)
		held.Lock()
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("waiting for the lock %s: %w", path, err)
		}
		if h := held.m[path]; h != nil && nested { // taken by this process meanwhile
			_ = f.Close()
			h.n++
			return releaser(path), nil
		}
	}
	if !ok {
		_ = f.Close()
		return nil, &BusyError{Path: path, Holder: ReadHolder(path)}
	}
	me := Holder{PID: os.Getpid(), Command: commandLine(), Started: time.Now().UTC().Truncate(time.Second)}
	data, _ := json.Marshal(me)
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		_ = f.Unlock()
		return nil, fmt.Errorf("writing the machine lock %s: %w", path, err)
	}
	held.m[path] = &hold{n: 1, f: f}
	return releaser(path), nil
}

func releaser(path string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			held.Lock()
			defer held.Unlock()
			h := held.m[path]
			if h == nil {
				return
			}
			if h.n--; h.n > 0 {
				return
			}
			delete(held.m, path)
			// Empty the file first so nobody reads a stale holder.
			_ = os.Truncate(path, 0)
			_ = h.f.Unlock()
		})
	}
}

// ReadHolder returns who holds the lock at path as written in the file;
// the zero Holder when the file is empty or unreadable.
func ReadHolder(path string) Holder {
	var h Holder
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &h) != nil {
		return Holder{}
	}
	return h
}

// MachineHolder reports who holds the machine lock of stateDir, and false
// when nobody does.
func MachineHolder(stateDir string) (Holder, bool, error) {
	return holderOf(MachineLockPath(stateDir))
}

func holderOf(path string) (Holder, bool, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return Holder{}, false, nil
	}
	held.Lock()
	h := held.m[path]
	held.Unlock()
	if h != nil {
		return ReadHolder(path), true, nil
	}
	f := flock.New(path)
	ok, err := f.TryRLock()
	if err != nil {
		return Holder{}, false, fmt.Errorf("checking the lock %s: %w", path, err)
	}
	_ = f.Close()
	if ok {
		return Holder{}, false, nil
	}
	return ReadHolder(path), true, nil
}

func commandLine() string {
	args := append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...)
	s := strings.Join(args, " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
