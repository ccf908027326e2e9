package bench

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/base/machinelock"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// TestMeasureLock: a sample shares the machine lock its own process holds
// (a job's samples), but while another process holds it (flock(1) here,
// another pgbisect's job or sample in life), a sample cannot start; once
// that process lets go, it can.
func TestMeasureLock(t *testing.T) {
	citest.Tool(t, "flock", "apt-get install util-linux")
	dir := t.TempDir()
	path := filepath.Join(dir, "machine.lock")
	ctx := context.Background()

	job, err := machinelock.Lock(ctx, path, false)
	if err != nil {
		t.Fatal(err)
	}
	sample, err := lockMeasure(ctx, path, dir)
	if err != nil {
		t.Fatalf("a sample inside this process's job: %v, want it to share the hold", err)
	}
	sample()
	job()

	// Another process holds the lock until its stdin closes.
	other := exec.Command("flock", "--exclusive", path, "sh", "-c", "echo locked; read x")
	in, _ := other.StdinPipe()
	out, _ := other.StdoutPipe()
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("flock(1) said %q", line)
	}
	gaveUp, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := lockMeasure(gaveUp, path, dir); err == nil || !strings.Contains(err.Error(), "another pgbisect is measuring") {
		t.Fatalf("a sample while another process holds the lock: %v, want it to wait", err)
	}
	done := make(chan error, 1)
	go func() {
		u, err := lockMeasure(ctx, path, dir)
		if err == nil {
			u()
		}
		done <- err
	}()
	in.Close() // the other process ends, and the kernel drops its flock
	if err := <-done; err != nil {
		t.Fatalf("after the other process let go: %v", err)
	}
	if u, err := lockMeasure(gaveUp, "-", dir); err != nil {
		t.Errorf(`"-" takes no lock: %v`, err)
	} else {
		u()
	}
}
