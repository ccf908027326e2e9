package nightly

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/store"
)

// daemonChild is the test binary acting as `pgbisect daemon`: the real
// Daemon on the real store, with a nightly pass that only says it ran and a
// "steps" job that checkpoints after each step like a bisection does after
// each sample. It exits when SIGTERM or SIGINT cancels its context.
func daemonChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	dir := os.Getenv("PGBISECT_STATE")
	st, err := store.Open(ctx, store.Config{URL: os.Getenv("PGBISECT_TEST_DB")})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer st.Close()
	sched, err := ParseSchedule("@every 1s", "UTC")
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	d := &Daemon{
		StateDir: dir,
		Worker:   "test-worker",
		Schedule: sched,
		Nightly: func(ctx context.Context, progress func(string)) error {
			fmt.Println("nightly ran")
			return nil
		},
		Queue:  st,
		Kinds:  []string{"steps"},
		RunJob: runSteps(dir),
		Poll:   200 * time.Millisecond,
		Log:    slog.New(slog.NewTextHandler(os.Stdout, nil)),
	}
	if err := d.Start(ctx); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	if err := d.Wait(); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

// runSteps runs a job of args {"steps": N}, resuming after the last step
// checkpointed in dir/job-ID.
func runSteps(dir string) func(ctx context.Context, job store.Job, progress func(string)) error {
	return func(ctx context.Context, job store.Job, progress func(string)) error {
		var args struct{ Steps int }
		if err := json.Unmarshal(job.Args, &args); err != nil {
			return err
		}
		ckpt := filepath.Join(dir, fmt.Sprintf("job-%d", job.ID))
		data, _ := os.ReadFile(ckpt)
		done, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		for i := done; i < args.Steps; i++ {
			progress(fmt.Sprintf("step %d of %d", i+1, args.Steps))
			fmt.Printf("job %d step %d started\n", job.ID, i)
			// One "sample": it is lost if interrupted, like a benchmark run.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(300 * time.Millisecond):
			}
			if err := os.WriteFile(ckpt, []byte(strconv.Itoa(i+1)), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

func TestDaemonSIGTERMAndResume(t *testing.T) {
	st := testStore(t)
	ctx := context.Background()
	dir := t.TempDir()
	env := "PGBISECT_TEST_DB=" + st.Cluster().URL()

	cmd, out := helper(t, "daemon", dir, env)
	expectLine(t, out, "nightly ran") // the schedule fires within seconds
	id, err := st.Enqueue(ctx, "steps", json.RawMessage(`{"steps": 4}`))
	if err != nil {
		t.Fatal(err)
	}
	expectLine(t, out, fmt.Sprintf("job %d step 2 started", id))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest := drain(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon exit after SIGTERM: %v\n%s", err, rest)
	}
	if !strings.Contains(rest, "result=interrupted") || !strings.Contains(rest, "daemon stopped") {
		t.Errorf("daemon output after SIGTERM lacks the interrupted job or the stop:\n%s", rest)
	}
	j, err := st.Job(ctx, id)
	if err != nil || j.Status != store.JobRunning || j.Progress != "step 3 of 4" {
		t.Fatalf("job after SIGTERM: %+v %v; want it left running at step 3", j, err)
	}
	if _, held, _ := MachineHolder(dir); held {
		t.Fatal("the machine lock outlived the daemon")
	}

	// The restarted daemon resumes the job at its checkpoint and finishes it.
	cmd, out = helper(t, "daemon", dir, env)
	line := expectLine(t, out, fmt.Sprintf("job %d step", id))
	if !strings.Contains(line, "step 2 started") {
		t.Fatalf("restarted daemon began with %q, want step 2", line)
	}
	expectLine(t, out, "result=ok")
	j, err = st.Job(ctx, id)
	if err != nil || j.Status != store.JobDone || j.Attempts != 2 {
		t.Fatalf("job after restart: %+v %v; want done after 2 attempts", j, err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("job-%d", id))); string(data) != "4" {
		t.Fatalf("checkpoint %q, want 4 steps done", data)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	drain(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon exit after SIGINT: %v", err)
	}
}

func drain(sc *bufio.Scanner) string {
	var b strings.Builder
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}
