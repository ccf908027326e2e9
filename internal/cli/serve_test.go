package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/jobs"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestServe runs "pgbisect serve" on a free port of the loopback address,
// fetches the overview and /metrics, and stops it by cancelling its context
// (what Ctrl-C does).
func TestServe(t *testing.T) {
	st := storetest.Store(t) // the results store PGBISECT_DB points at
	t.Setenv(webTokenEnv, "tok-"+t.Name())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	exit := make(chan int, 1)
	go func() {
		exit <- Main(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--state", t.TempDir()}, io.Discard, pw)
		pw.Close()
	}()
	// The address it listens on is in its first line on stderr.
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading serve's stderr: %v", err)
	}
	go io.Copy(io.Discard, pr) //nolint:errcheck // drain the rest
	m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serve said %q, want the loopback URL it serves on", line)
	}
	for path, want := range map[string]string{"/": "Nightly passes", "/metrics": "pgbisect_store_up 1"} {
		resp, err := http.Get("http://" + m[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, no %q", path, resp.StatusCode, want)
		}
	}
	// The write API queues a bisection as 'pgbisect request bisect' does.
	post := func(body string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+m[1]+"/api/requests", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok-"+t.Name())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(`{"kind": "bisect", "scenario": "no/such.yaml", "good": "a", "bad": "b"}`); code != 400 ||
		!strings.Contains(body, "no/such.yaml") {
		t.Errorf("a request for a missing scenario: %d %s", code, body)
	}
	code, body := post(`{"kind": "bisect", "scenario": "../../configs/scenarios/copy-single.yaml", "good": "REL_15_0", "bad": "REL_16_0", "point": "clients=1"}`)
	var out struct{ ID int64 }
	if err := json.Unmarshal([]byte(body), &out); code != 201 || err != nil {
		t.Fatalf("a valid request: %d %s", code, body)
	}
	// Cancelled at once, so no daemon test of this package runs it.
	queue, err := jobs.NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	var j jobs.Job
	all, err := queue.Jobs(context.Background(), 0)
	for _, x := range all {
		if x.ID == out.ID {
			j = x
		}
	}
	if _, cerr := queue.Cancel(context.Background(), out.ID); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	var c struct {
		Request app.BisectRequest `json:"request"`
	}
	err = json.Unmarshal(j.Args, &c)
	args := c.Request
	if err != nil || j.Kind != "bisect" ||
		!filepath.IsAbs(args.Scenario) || args.Bad != "REL_16_0" || args.Point != "clients=1" || args.Requester != "dashboard" {
		t.Errorf("queued %s %s", j.Kind, j.Args)
	}

	cancel()
	if code := <-exit; code != 0 {
		t.Errorf("serve exited %d after its context ended", code)
	}
}
