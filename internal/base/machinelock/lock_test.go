package machinelock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary act as a second pgbisect process: the
// machine lock is an flock, which only another process can contend for.
func TestMain(m *testing.M) {
	// Tests run many state directories at once: a machine lock for each.
	os.Setenv(Env, "state")
	switch os.Getenv("PGBISECT_LOCK_HELPER") {
	case "lock":
		holdLock(os.Getenv("PGBISECT_STATE"))
		return
	}
	os.Exit(m.Run())
}

// holdLock takes the machine lock, says so on stdout and holds it until
// stdin is closed.
func holdLock(stateDir string) {
	unlock, err := Lock(context.Background(), Path(stateDir), false)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	unlock()
}

// helper starts the test binary as helper kind; it returns the command and
// its stdout, read line by line.
func helper(t *testing.T, kind, stateDir string, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PGBISECT_LOCK_HELPER="+kind, "PGBISECT_STATE="+stateDir)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if kind == "lock" {
		if _, err := cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, bufio.NewScanner(out)
}

// expectLine reads lines until one contains want, failing on EOF.
func expectLine(t *testing.T, sc *bufio.Scanner, want string) string {
	t.Helper()
	for sc.Scan() {
		if strings.Contains(sc.Text(), want) {
			return sc.Text()
		}
	}
	t.Fatalf("helper ended without printing %q (scan error %v)", want, sc.Err())
	return ""
}

func TestLockMachineBusyNamesHolder(t *testing.T) {
	dir := t.TempDir()
	cmd, out := helper(t, "lock", dir)
	expectLine(t, out, "locked")

	_, err := Lock(context.Background(), Path(dir), false)
	var busy *BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("LockMachine while another process holds it: %v, want a BusyError", err)
	}
	if busy.Holder.PID != cmd.Process.Pid {
		t.Errorf("holder pid %d, want %d", busy.Holder.PID, cmd.Process.Pid)
	}
	msg := err.Error()
	for _, want := range []string{fmt.Sprintf("pid %d", cmd.Process.Pid), "machinelock.test", "--wait"} {
		if !strings.Contains(msg, want) {
			t.Errorf("busy message %q does not mention %q", msg, want)
		}
	}
	if h, held, err := HolderOf(Path(dir)); err != nil || !held || h.PID != cmd.Process.Pid {
		t.Errorf("MachineHolder = %+v, %v, %v; want the helper", h, held, err)
	}

	// Waiting gets the lock once the holder lets go.
	got := make(chan error, 1)
	go func() {
		unlock, err := Lock(context.Background(), Path(dir), true)
		if err == nil {
			if h, _, _ := HolderOf(Path(dir)); h.PID != os.Getpid() {
				err = fmt.Errorf("lock file names pid %d, want %d", h.PID, os.Getpid())
			}
			unlock()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("LockMachine with wait returned %v while the helper held the lock", err)
	case <-time.After(2 * Poll): // not a timing assertion: it must still be waiting
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil { // dies; the kernel drops its flock
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if _, held, _ := HolderOf(Path(dir)); held {
		t.Error("lock still held after unlock")
	}
}

func TestLockMachineNestsWithinProcess(t *testing.T) {
	dir := t.TempDir()
	u1, err := Lock(context.Background(), Path(dir), false)
	if err != nil {
		t.Fatal(err)
	}
	u2, err := Lock(context.Background(), Path(dir), false)
	if err != nil {
		t.Fatalf("nested Lock: %v", err)
	}
	u2()
	u2() // a second call of one unlock is harmless
	if _, held, _ := HolderOf(Path(dir)); !held {
		t.Fatal("inner unlock released the outer hold")
	}
	u1()
	if _, held, _ := HolderOf(Path(dir)); held {
		t.Fatal("lock held after the last unlock")
	}
}

func TestLockMachineWaitCancelled(t *testing.T) {
	dir := t.TempDir()
	_, out := helper(t, "lock", dir)
	expectLine(t, out, "locked")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Lock(ctx, Path(dir), true); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting with a cancelled context: %v, want context.Canceled", err)
	}
}

// TestMachineLockPerMachine: without PGBISECT_MACHINE_LOCK=state, two
// state directories share the one machine lock.
func TestMachineLockPerMachine(t *testing.T) {
	t.Setenv(Env, filepath.Join(t.TempDir(), "machine.lock"))
	a, b := t.TempDir(), t.TempDir()
	if Path(a) != Path(b) {
		t.Fatalf("two state directories, two locks: %s, %s", Path(a), Path(b))
	}
	t.Setenv(Env, "")
	want := filepath.Join(os.TempDir(), "pgbisect-machine-"+strconv.Itoa(os.Geteuid())+".lock")
	if os.Geteuid() == 0 {
		want = RootPath
	}
	if got := Path(a); got != want {
		t.Errorf("default machine lock %s, want %s", got, want)
	}
	t.Setenv(Env, "state")
	if Path(a) == Path(b) {
		t.Error("PGBISECT_MACHINE_LOCK=state: one lock for two state directories")
	}
}

// TestLockRefusesLink: a link planted at the lock's path (it lives in a
// directory every user can write) is refused, and the file it points to
// is neither written nor truncated.
func TestLockRefusesLink(t *testing.T) {
	d := t.TempDir()
	victim := filepath.Join(d, "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(d, "pgbisect-machine.lock")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if unlock, err := Lock(context.Background(), link, false); err == nil {
		unlock()
		t.Fatal("locked through a link")
	}
	if h, busy, err := HolderOf(link); err == nil && busy {
		t.Errorf("HolderOf through a link: %v", h)
	}
	if data, err := os.ReadFile(victim); err != nil || string(data) != "keep me\n" {
		t.Errorf("the link's target was changed: %q, %v", data, err)
	}
	// A dangling link is not created through either.
	dangling := filepath.Join(d, "dangling.lock")
	if err := os.Symlink(filepath.Join(d, "created"), dangling); err != nil {
		t.Fatal(err)
	}
	if unlock, err := Lock(context.Background(), dangling, false); err == nil {
		unlock()
		t.Fatal("locked through a dangling link")
	}
	if _, err := os.Lstat(filepath.Join(d, "created")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was created through a dangling link: %v", err)
	}
}
