package faults

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/internal/base/machinelock"
	"github.com/pgbisect/pgbisect/store"
)

var (
	kills   = flag.Int("faults.kills", 4, "SIGKILLs of the bisecting process in TestKill9AndResume (by hand: 50)")
	seed    = flag.Uint64("faults.seed", 1, "seed of the simulated history and of the kill times")
	commits = flag.Int("faults.commits", 256, "commits in the simulated range (enough that a run outlasts the kill times: the statistics decide large effects in a few samples)")
)

// The child process: a pgbisect bisection reduced to its engine, state
// saver and machine lock, on a simulated lab. The environment says where.
const (
	childDir     = "PGBISECT_FAULTS_DIR"     // the state directory
	childDB      = "PGBISECT_FAULTS_DB"      // the results store's URL
	childJournal = "PGBISECT_FAULTS_JOURNAL" // the measurement journal
	childMetric  = "PGBISECT_FAULTS_METRIC"  // names the bisection
	childArgs    = "PGBISECT_FAULTS_ARGS"    // "seed commits"
	childDelay   = "PGBISECT_FAULTS_DELAY"   // how long a build and a sample take
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childSample); dir != "" {
		if err := sampleMain(dir); err != nil {
			fmt.Fprintln(os.Stderr, "faults sample child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(childDir) != "" {
		if err := childMain(); err != nil {
			fmt.Fprintln(os.Stderr, "faults child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The machine lock of each test's state directory, not the host's:
	// the tests check that a kill leaves it free, which another pgbisect
	// measuring on this host (a bench test of another package) must not
	// decide. Children inherit it.
	os.Setenv(machinelock.Env, "state")
	os.Exit(m.Run())
}

// childMain runs (or resumes) one bisection as pgbisect bisect does: under
// the machine lock, saving the state after every build and sample.
func childMain() error {
	dir := os.Getenv(childDir)
	var sd uint64
	var n int
	if _, err := fmt.Sscan(os.Getenv(childArgs), &sd, &n); err != nil {
		return fmt.Errorf("%s: %w", childArgs, err)
	}
	ctx := context.Background()
	unlock, err := machinelock.Lock(ctx, machinelock.Path(dir), true)
	if err != nil {
		return err
	}
	defer unlock()
	h := history(sd, n)
	s, err := bisect.NewState(inputs(h, os.Getenv(childMetric)), h.Commits, fixedNow())
	if err != nil {
		return err
	}
	// The state is saved where pgbisect saves it: in the results store.
	saver, err := store.Open(ctx, store.Config{URL: os.Getenv(childDB)})
	if err != nil {
		return err
	}
	defer saver.Close()
	switch prev, err := saver.LoadBisection(ctx, s.ID); {
	case err == nil:
		s = prev
	case !errors.Is(err, bisect.ErrNotFound):
		return err
	}
	j, err := os.OpenFile(os.Getenv(childJournal), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer j.Close()
	delay, _ := time.ParseDuration(os.Getenv(childDelay))
	l := newLab(h, sd, s, j, delay)
	return (&bisect.Engine{Builder: l, Measurer: l, Saver: saver, Now: fixedNow}).Run(ctx, s)
}

// stateDir is a directory for a child's state: on /dev/shm when there is
// one, since the saver syncs after every sample and what is tested is the
// order of writes and renames, not the disk.
func stateDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/dev/shm", "pgbisect-faults-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func child(db, dir, journal, metric string, sd uint64, n int, delay time.Duration) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDB+"="+db, childDir+"="+dir, childDelay+"="+delay.String(), childJournal+"="+journal, childMetric+"="+metric,
		childArgs+"="+fmt.Sprint(sd, " ", n))
	return cmd
}

// TestKill9AndResume kills the bisecting process with SIGKILL at random
// moments, starting it again after each kill, and checks that the bisection
// ends exactly like an uninterrupted one (same culprits, same samples, the
// same sample count: none lost, none taken twice) and that no kill left
// the machine lock held.
func TestKill9AndResume(t *testing.T) {
	db := resultsDB(t)
	dir := stateDir(t)
	journal := filepath.Join(dir, "journal")
	h := history(*seed, *commits)
	want, err := reference(h, *seed, "elapsed")
	if err != nil {
		t.Fatal(err)
	}
	if want.Outcome != bisect.OutcomeFound || len(want.Culprits) == 0 {
		t.Fatalf("the uninterrupted bisection found no culprit (%s): choose another -faults.seed", want.Summary)
	}
	rng := rand.New(rand.NewPCG(*seed, 99))
	landed := 0
	for run := 0; ; run++ {
		cmd := child(db, dir, journal, "elapsed", *seed, *commits, 0)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if landed < *kills {
			// A moment anywhere in a run of about a second.
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("run %d: %v\n%s", run, err, out.String())
				}
				t.Fatalf("run %d finished before kill %d of %d: lower -faults.kills or raise -faults.commits", run, landed+1, *kills)
			case <-time.After(time.Duration(5+rng.IntN(200)) * time.Millisecond):
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); errors.Is(err, os.ErrProcessDone) {
				t.Fatalf("run %d finished before kill %d of %d: lower -faults.kills or raise -faults.commits", run, landed+1, *kills)
			} else if err != nil {
				t.Fatal(err)
			}
			err := <-done
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("run %d: %v, want killed by SIGKILL\n%s", run, err, out.String())
			}
			landed++
			// The kernel released the flock with the process: the machine
			// is free at once, with no stale lock to clear.
			unlock, err := machinelock.Lock(context.Background(), machinelock.Path(dir), false)
			if err != nil {
				t.Fatalf("after kill %d: %v", landed, err)
			}
			unlock()
			continue
		}
		if err := <-done; err != nil {
			t.Fatalf("final run: %v\n%s", err, out.String())
		}
		break
	}
	st, err := store.Open(context.Background(), store.Config{URL: db})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.LoadBisection(context.Background(), want.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameBisection(t, got, want)
	t.Logf("%d kills, %d samples, culprits %s", landed, got.SamplesTaken, got.Summary)
}

func sameBisection(t *testing.T, got, want *bisect.State) {
	t.Helper()
	if !got.Done() {
		t.Fatalf("the resumed bisection is not done: phase %v", got.Phase)
	}
	if !reflect.DeepEqual(got.Culprits, want.Culprits) {
		t.Errorf("culprits %s, want %s", got.Summary, want.Summary)
	}
	if got.SamplesTaken != want.SamplesTaken {
		t.Errorf("%d samples taken, want %d (a sample lost or taken twice)", got.SamplesTaken, want.SamplesTaken)
	}
	if !reflect.DeepEqual(got.Samples, want.Samples) || !reflect.DeepEqual(got.SampleSeq, want.SampleSeq) {
		t.Errorf("the samples differ from the uninterrupted bisection's")
	}
}

// TestTwoProcessesNeverMeasureAtOnce starts two bisections on one machine
// (one state directory) at the same time: the machine lock lets one
// measure, then the other, and never both at once.
func TestTwoProcessesNeverMeasureAtOnce(t *testing.T) {
	db := resultsDB(t)
	dir := stateDir(t)
	journal := filepath.Join(dir, "journal")
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for _, metric := range []string{"a", "b"} {
		cmd := child(db, dir, journal, metric, *seed, 8, time.Millisecond)
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	type span struct {
		pid        int
		start, end int64
	}
	f, err := os.Open(journal)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var spans []span
	per := map[int]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var s span
		if _, err := fmt.Sscan(sc.Text(), &s.pid, &s.start, &s.end); err != nil {
			t.Fatalf("journal line %q: %v", sc.Text(), err)
		}
		spans = append(spans, s)
		per[s.pid]++
	}
	if len(per) != 2 {
		t.Fatalf("measurements from %d processes, want 2: %v", len(per), per)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i := 1; i < len(spans); i++ {
		if p, c := spans[i-1], spans[i]; p.pid != c.pid && c.start < p.end {
			t.Fatalf("pid %d started measuring while pid %d was measuring", c.pid, p.pid)
		}
	}
	t.Logf("%d samples by two processes, none overlapping: %v", len(spans), strings.TrimSpace(fmt.Sprint(per)))
}
