// Package machinelock is the one machine-wide lock that keeps benchmarks
// from overlapping: two pgbisect processes, whatever their state
// directories, never build and measure at the same time.
//
// The design choice that matters: the lock is held per job, and a sample
// takes it too, re-entrantly. A job (a bisection, a comparison, a nightly
// pass, 'pgbisect run') holds it from its first build to its last sample,
// because another job's builds and servers disturb its measurements as
// much as another job's samples would, and an A/B comparison is fair only
// if nothing else runs during all of it, not just during each sample.
// Every sample (bench.Runner) takes the same lock as well: inside a job
// its process already holds it and the sample shares that hold at no cost;
// outside one (bench used as a library, a test) the sample holds it for its
// own duration. So there is one file and one rule, and measuring code need
// not know whether a job is around it.
//
// It is an flock(2), released by the kernel however its holder dies; the
// file names the holder (pid, command line, start) so a busy machine can
// say who uses it.
package machinelock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"
)

// RootPath is the machine lock of a pgbisect running as root.
const RootPath = "/run/lock/pgbisect-machine.lock"

// Env moves the machine lock: a path, or "state" for a lock per state
// directory (its file StateFile), as tests that run many state directories
// at once need.
const Env = "PGBISECT_MACHINE_LOCK"

// StateFile is the name of the lock in a state directory, where it is with
// PGBISECT_MACHINE_LOCK=state.
const StateFile = "lock"

// Path is the machine lock's file for a process with state directory
// stateDir: RootPath for every user, so that root's daemon and a person's
// own pgbisect exclude each other too (an flock needs only a read-only
// open, so a file another user created serves); one per user in the
// temporary directory where /run/lock is missing; or as Env says.
func Path(stateDir string) string {
	switch v := os.Getenv(Env); v {
	case "":
		if fi, err := os.Stat(filepath.Dir(RootPath)); err == nil && fi.IsDir() {
			return RootPath
		}
		return filepath.Join(os.TempDir(), "pgbisect-machine-"+strconv.Itoa(os.Geteuid())+".lock")
	case "state":
		if stateDir == "" {
			return filepath.Join(os.TempDir(), "pgbisect-machine-"+strconv.Itoa(os.Geteuid())+".lock")
		}
		return filepath.Join(stateDir, StateFile)
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

// BusyError is returned by Lock when another process holds the lock
// and the caller did not ask to wait.
type BusyError struct {
	Path   string
	Holder Holder
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("the machine is busy: %s holds %s; benchmarks must not overlap, so wait for it to finish (or pass --wait), or stop it", e.Holder, e.Path)
}

// Poll is how often a waiting Lock retries.
const Poll = 100 * time.Millisecond

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

// Lock takes the machine lock at path (see Path). With wait it waits until
// the lock is free or ctx is done; without, it returns a *BusyError naming
// the holder. A caller that wants to say "waiting for ..." calls it first
// without wait, prints the BusyError's Holder, then calls it again with
// wait.
//
// The lock is held by this process until unlock is called, and nested
// calls in one process share it: a job's samples share the job's hold.
func Lock(ctx context.Context, path string, wait bool) (unlock func(), err error) {
	return lockFile(ctx, path, wait)
}

// lockFile takes the flock at path; a second hold by this process shares
// the first.
func lockFile(ctx context.Context, path string, wait bool) (unlock func(), err error) {
	held.Lock()
	defer held.Unlock()
	if h := held.m[path]; h != nil {
		h.n++
		return releaser(path), nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating the directory of the machine lock: %w", err)
	}
	f := newFlock(path)
	ok, err := f.TryLock()
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if !ok && wait {
		// Waiting must not hold held's mutex: another goroutine of this
		// process may be releasing the lock we wait for.
		held.Unlock()
		ok, err = f.TryLockContext(ctx, Poll)
		held.Lock()
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("waiting for the lock %s: %w", path, err)
		}
		if h := held.m[path]; h != nil { // taken by this process meanwhile
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
	writeHolder(path, append(data, '\n'))
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
			writeHolder(path, nil)
			_ = h.f.Unlock()
		})
	}
}

// ReadHolder returns who holds the lock at path as written in the file;
// the zero Holder when the file is empty or unreadable.
func ReadHolder(path string) Holder {
	var h Holder
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return Holder{}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil || json.Unmarshal(data, &h) != nil {
		return Holder{}
	}
	return h
}

// newFlock is the flock of path, opened read-only (all an flock needs)
// and never through a link: the lock lives in a directory every user can
// write, and root must not be led to open, create or truncate another
// file through a link planted there. The file is created only when
// missing, since with fs.protected_regular root may not open with O_CREAT
// a file another user created there.
func newFlock(path string) *flock.Flock {
	flag := os.O_RDONLY | syscall.O_NOFOLLOW
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		flag |= os.O_CREATE
	}
	return flock.New(path, flock.SetFlag(flag), flock.SetPermissions(0o644))
}

// writeHolder replaces the lock file's content with data, never through
// a link. It is best effort: a lock file another user created cannot be
// written, and the holder then stays unnamed.
func writeHolder(path string, data []byte) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.Write(data)
}

// HolderOf reports who holds the machine lock at path, and false when
// nobody does.
func HolderOf(path string) (Holder, bool, error) {
	return holderOf(path)
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
	f := newFlock(path)
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
