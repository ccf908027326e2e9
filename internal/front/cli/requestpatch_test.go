package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/internal/testkit/gittest"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestDaemonAppliesQueuedPatch: 'pgbisect request compare BASE --patch
// FILE' queues the patch's content (the file is gone before the daemon
// runs), and the daemon's compare worker, a real River job, applies it on
// top of BASE with compare --patch's code (the synthetic commit) and
// journals its events for the requester. The repository is a small git
// repository, not PostgreSQL, so the build after the patch fails at once:
// nothing is built or measured.
func TestDaemonAppliesQueuedPatch(t *testing.T) {
	storetest.NeedServer(t)
	t.Setenv("PGBISECT_DB", "") // the private cluster in the state directory
	repo, c1, _, _, _ := gittest.Repo(t)
	state := t.TempDir()
	for _, d := range []string{filepath.Dir(state), state} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	scenario, err := filepath.Abs("../../../configs/scenarios/copy-single.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(state, "pgbisect.yaml")
	linkScenarios(t, state)
	if err := os.WriteFile(cfgFile, []byte("repo: "+repo+"\nnightly:\n  scenarios: ["+scenario+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		Main(context.Background(), []string{"db", "stop", "--state", state}, &bytes.Buffer{}, &bytes.Buffer{})
	})
	patch := filepath.Join(t.TempDir(), "fix.patch")
	if err := os.WriteFile(patch, []byte(testPatch), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"request", "compare", "--config", cfgFile, "--state", state,
		"-s", "copy-single", c1, "--patch", patch}, &out, &out); code != 0 {
		t.Fatalf("request: %s", out.String())
	}
	if !strings.Contains(out.String(), "+ fix.patch (") {
		t.Errorf("request said %q", out.String())
	}
	if err := os.Remove(patch); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var dout proctest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"daemon", "--config", cfgFile, "--state", state, "--no-nightly", "--machine", "patch-machine"}, &dout, &dout)
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
	var job jobs.Job
	for deadline := time.Now().Add(2 * time.Minute); ; {
		js, err := q.Jobs(context.Background(), 10)
		if err != nil || len(js) != 1 {
			t.Fatalf("jobs: %+v %v", js, err)
		}
		if job = js[0]; job.Error != "" || job.State == "completed" {
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
	evs, err := st.Events(context.Background(), jobs.EventsOf(job.Key), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var patched, end *app.Event
	for _, se := range evs {
		e, err := app.Decode(se)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.Contains(e.Text, "with 1 patch(es): fix.patch"):
			patched = &e
		case e.Kind == app.KindDone:
			end = &e
		}
	}
	if patched == nil || !strings.Contains(patched.Text, "the patched tree is commit") {
		t.Fatalf("the job's events do not show the patch applied (job %s, error %q):\n%+v", job.State, job.Error, evs)
	}
	if end == nil || end.Error == "" || !strings.Contains(job.Error, end.Error) {
		t.Errorf("the job's last event %+v, want its failure (%q)", end, job.Error)
	}
	t.Logf("job %s: %s; error %q", job.State, patched.Text, job.Error)
}
