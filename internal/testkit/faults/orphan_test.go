package faults

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/internal/base/proc"
)

const childSample = "PGBISECT_FAULTS_SAMPLE" // a state directory: run one long sample there

// sampleMain measures one sample whose workload sleeps for a minute: the
// parent kills this process with SIGKILL in the middle of it.
func sampleMain(dir string) error {
	r, err := runner(dir)
	if err != nil {
		return err
	}
	sc, err := bench.Load([]byte("workload:\n  - sql: SELECT pg_sleep(60)\nmetrics:\n  - {name: e, step: sql, value: elapsed}\n"), "sleep.yaml", nil)
	if err != nil {
		return err
	}
	_, err = r.Run(context.Background(), sc, bench.Target{Name: "pg", BinDir: os.Getenv("PGBISECT_PG_BINDIR")}, bench.Point{})
	return err
}

func runner(dir string) (*bench.Runner, error) {
	r := &bench.Runner{StateDir: dir}
	if proc.IsRoot() {
		u, err := proc.LookupUser(proc.BenchUser)
		if err != nil {
			return nil, err
		}
		r.RunAs = u
	}
	return r, nil
}

// TestKill9LeavesNoOrphanServer kills pgbisect with SIGKILL while a
// benchmark server runs a sample. The server survives its parent (pg_ctl
// puts it in a session of its own); the next run on the state directory,
// as a resumed bisection makes, finds the cluster of a dead pgbisect,
// stops its server (after checking the pid is that server) and removes it.
func TestKill9LeavesNoOrphanServer(t *testing.T) {
	bin := pgBin(t)
	t.Setenv("PGBISECT_PG_BINDIR", bin)
	dir := openDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childSample+"="+dir)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Wait until the sample's server is up and running its workload.
	var pm int
	var dataDir string
	deadline := time.Now().Add(2 * time.Minute)
	for pm == 0 {
		select {
		case err := <-exited:
			t.Fatalf("the sampling process ended before it was killed: %v\n%s", err, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server appeared under %s\n%s", dir, out)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "clusters", "*", "data", "postmaster.pid"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			line, _, _ := strings.Cut(string(b), "\n")
			// The last line says "ready" once the server accepts connections.
			if p, err := strconv.Atoi(strings.TrimSpace(line)); err == nil && strings.Contains(string(b), "ready") {
				pm, dataDir = p, filepath.Dir(f)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	if syscall.Kill(pm, 0) != nil {
		t.Fatal("the server died with pgbisect: nothing left to clean up, the test shows nothing")
	}

	r, err := runner(dir)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := bench.Load([]byte("workload:\n  - sql: SELECT 1\nmetrics:\n  - {name: e, step: sql, value: elapsed}\n"), "one.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background(), sc, bench.Target{Name: "pg", BinDir: bin}, bench.Point{}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.ReadFile("/proc/" + strconv.Itoa(pm) + "/stat"); err == nil && !strings.Contains(string(st), ") Z ") {
		t.Errorf("the orphaned server (pid %d) still runs after the next run", pm)
	}
	if _, err := os.Stat(filepath.Dir(dataDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed run's cluster %s is still there: %v", filepath.Dir(dataDir), err)
	}
}
