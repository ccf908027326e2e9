// Package proctest runs child processes in tests: daemons started as the
// test binary in a child mode, killed, paused and stopped by the test.
//
// A Proc keeps its combined output. When the test ends it is sent SIGCONT
// (in case the test paused it) and SIGTERM, and killed if it has not
// exited within a minute; if the test failed, the tail of its output is
// logged.
package proctest

import (
	"bytes"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// TailLines is how many of a process's last output lines a failure shows.
const TailLines = 60

// Proc is a child process started by Start.
type Proc struct {
	Name string
	Cmd  *exec.Cmd

	out  Buffer
	done chan struct{}
}

// Buffer is a bytes.Buffer that a process or goroutine may write while
// the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Start starts cmd, named name in failures; its stdout and stderr go to
// the Proc's output.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Name: name, Cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s:\n%s", name, p.Tail(TailLines))
		}
	})
	return p
}

// Write appends to the output; it is the child's stdout and stderr.
func (p *Proc) Write(b []byte) (int, error) { return p.out.Write(b) }

// Output is everything the process has written so far.
func (p *Proc) Output() string { return p.out.String() }

// Tail is the last n lines of the output.
func (p *Proc) Tail(n int) string { return LastLines(p.Output(), n) }

// LastLines is the last n lines of s, for failure messages (proc.Tail).
func LastLines(s string, n int) string { return proc.Tail(s, n) }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Signal sends sig to the process, failing t if it cannot be sent.
func (p *Proc) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: signal %v: %v", p.Name, sig, err)
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and fails t unless the process exits 0 within a
// minute.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop within a minute of SIGTERM", p.Name)
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("%s exited %d after SIGTERM:\n%s", p.Name, code, p.Tail(TailLines))
	}
}

// WaitUntil polls cond until it holds. It fails t after limit, or as soon
// as one of procs exits first.
func WaitUntil(t testing.TB, limit time.Duration, what string, cond func() bool, procs ...*Proc) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); {
		for _, p := range procs {
			select {
			case <-p.done:
				t.Fatalf("%s exited while waiting for: %s\n%s", p.Name, what, p.Tail(TailLines))
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not after %s: %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
