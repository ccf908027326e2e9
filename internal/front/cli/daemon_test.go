package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestDaemonRunsQueuedRequest starts `pgbisect daemon` in-process on a real
// results store, queues a bisection whose repository does not exist, and
// checks that the daemon joins, runs it as a River job, records the failure
// with its error and its log, and keeps running until cancelled.
func TestDaemonRunsQueuedRequest(t *testing.T) {
	storetest.NeedServer(t)
	t.Setenv("PGBISECT_DB", "") // the private cluster in the state directory
	state := t.TempDir()
	for _, d := range []string{filepath.Dir(state), state} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	scenarios := filepath.Join(state, "scenarios")
	if err := os.Mkdir(scenarios, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../../configs/scenarios/copy-single.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scenarios, "copy-single.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(state, "pgbisect.yaml")
	missing := filepath.Join(state, "no-such-repo")
	if err := os.WriteFile(cfgFile, []byte("repo: "+missing+"\nnightly:\n  scenarios: [scenarios/copy-single.yaml]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		Main(context.Background(), []string{"db", "stop", "--state", state}, &bytes.Buffer{}, &bytes.Buffer{})
	})

	var out bytes.Buffer
	if code := Main(context.Background(), []string{"request", "bisect", "--config", cfgFile, "--state", state,
		"-s", "copy-single", "--good", "A", "--bad", "B"}, &out, &out); code != 0 {
		t.Fatalf("request: %s", out.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var dout proctest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"daemon", "--config", cfgFile, "--state", state, "--no-nightly", "--machine", "test-machine", "--serve", "127.0.0.1:0"}, &dout, &dout)
	}()

	st, err := store.Open(context.Background(), store.Config{StateDir: state, RunAs: "pgbisect"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q, err := jobs.NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	// The job fails (the repository is missing) and waits for River's
	// retry; its error names the repository.
	var job jobs.Job
	for deadline := time.Now().Add(2 * time.Minute); ; {
		js, err := q.Jobs(context.Background(), 10)
		if err != nil || len(js) != 1 {
			t.Fatalf("jobs: %+v %v", js, err)
		}
		if job = js[0]; job.Error != "" {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("daemon exited %d before finishing the job:\n%s", code, dout.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("job still %s after 2 minutes:\n%s", job.State, dout.String())
		}
	}
	if job.State == "completed" || job.Attempt < 1 || !strings.Contains(job.Error, "no-such-repo") || job.Machine != "test-machine" {
		t.Fatalf("job %s on %q with error %q, want a failed attempt on test-machine naming the missing repository", job.State, job.Machine, job.Error)
	}
	log, _ := os.ReadFile(filepath.Join(state, "logs", "jobs", "job-"+job.Key+".log"))
	if !strings.Contains(string(log), "pgbisect bisect") {
		t.Errorf("job log lacks the command:\n%s", log)
	}
	ms, err := st.Machines(context.Background())
	if err != nil || len(ms) != 1 || ms[0].Name != "test-machine" || ms[0].Class != "default" {
		t.Errorf("machines: %+v %v", ms, err)
	}
	// The dashboard it serves beside its jobs (--serve) answers.
	m := regexp.MustCompile(`dashboard on (http://[^ ]+/)`).FindStringSubmatch(dout.String())
	if m == nil {
		t.Fatalf("the daemon does not say where its dashboard is:\n%s", dout.String())
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "pgbisect") {
		t.Errorf("dashboard %s: %d\n%s", m[1], resp.StatusCode, page)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("daemon exited %d after cancel:\n%s", code, dout.String())
	}
	for _, want := range []string{"result=failed", "daemon stopped"} {
		if !strings.Contains(dout.String(), want) {
			t.Errorf("daemon output lacks %q:\n%s", want, dout.String())
		}
	}
}
