package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
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
		exit <- Main(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--config", "../../../configs/pgbisect.yaml", "--state", t.TempDir()}, io.Discard, pw)
		pw.Close()
	}()
	// The address it listens on is in its first line on stderr after the
	// config line.
	line, err := serveAddrLine(pr)
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
	// A scenario is a name of the scenario directory, never a path: the
	// issue's leak (the store's passfile, a line of /etc/shadow quoted back
	// in the error) is a 400 naming the scenarios there are, with no byte
	// of the file.
	secret := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(secret, []byte("root:SECRET-LINE-"+t.Name()+":19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{secret, "/var/lib/pgbisect/db/passfile", "../../../configs/scenarios/copy-single.yaml", "/etc/shadow", "..", "copy-single/../../x"} {
		body, _ := json.Marshal(map[string]string{"kind": "bisect", "scenario": path, "good": "a", "bad": "b"})
		code, got := post(string(body))
		if code != 400 || strings.Contains(got, "SECRET-LINE") || strings.Contains(got, "root:") || strings.Contains(got, ":*:*:") ||
			!strings.Contains(got, "not a path") || !strings.Contains(got, "copy-single") || !strings.Contains(got, "clog-unlogged-pgbench") {
			t.Errorf("a request naming %s: %d %s, want 400 naming the scenarios and quoting nothing of the file", path, code, got)
		}
	}
	// Values set for variables reach no step as free text, and a
	// comparison may not name an installation's bin directory.
	for body, want := range map[string]string{
		`{"kind": "compare", "scenario": "copy-single", "a": "/usr/lib/postgresql/15/bin", "b": "REL_16_0"}`: "is not a revision",
	} {
		if code, got := post(body); code != 400 || !strings.Contains(got, want) {
			t.Errorf("%s: %d %s, want 400 with %s", body, code, got, want)
		}
	}
	// Checked as far as it can be before it is queued: the scenario's
	// metric and point.
	for body, want := range map[string]string{
		`{"kind": "bisect", "scenario": "copy-single", "good": "a", "bad": "b", "metric": "tps"}`:  `field \"metric\"`,
		`{"kind": "compare", "scenario": "copy-single", "a": "a", "b": "b", "point": "clients=9"}`: `field \"point\"`,
		`{"kind": "compare", "scenario": "copy-singel", "a": "a", "b": "b"}`:                       `field \"scenario\"`,
	} {
		if code, got := post(body); code != 400 || !strings.Contains(got, want) {
			t.Errorf("%s: %d %s, want 400 with %s", body, code, got, want)
		}
	}
	code, body := post(`{"kind": "bisect", "scenario": "copy-single", "good": "REL_15_0", "bad": "REL_16_0", "metric": "parse_time"}`)
	var out struct{ ID int64 }
	if err := json.Unmarshal([]byte(body), &out); code != 201 || err != nil {
		t.Fatalf("a valid request: %d %s", code, body)
	}
	code, body = post(`{"kind": "compare", "scenario": "copy-single", "a": "REL_15_0", "b": "REL_16_0", "min_effect": 0.05}`)
	var cmp struct{ ID int64 }
	if err := json.Unmarshal([]byte(body), &cmp); code != 201 || err != nil {
		t.Fatalf("a valid comparison: %d %s", code, body)
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
	var jc jobs.Job
	for _, x := range all {
		if x.ID == cmp.ID {
			jc = x
		}
	}
	if _, cerr := queue.Cancel(context.Background(), out.ID); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	if _, err := queue.Cancel(context.Background(), cmp.ID); err != nil {
		t.Fatal(err)
	}
	var cc struct {
		Request app.CompareRequest `json:"request"`
	}
	if err := json.Unmarshal(jc.Args, &cc); err != nil || jc.Kind != "compare" || cc.Request.Scenario != "copy-single" ||
		cc.Request.A != "REL_15_0" || cc.Request.B != "REL_16_0" || cc.Request.MinEffect != 0.05 {
		t.Errorf("queued %s %s", jc.Kind, jc.Args)
	}
	var c struct {
		Request app.BisectRequest `json:"request"`
	}
	err = json.Unmarshal(j.Args, &c)
	args := c.Request
	if err != nil || j.Kind != "bisect" ||
		args.Scenario != "copy-single" || args.Bad != "REL_16_0" || args.Metric != "parse_time" || args.Requester != "dashboard" {
		t.Errorf("queued %s %s", j.Kind, j.Args)
	}

	cancel()
	if code := <-exit; code != 0 {
		t.Errorf("serve exited %d after its context ended", code)
	}
}

// TestServePrivate: with web.private in the config, serve refuses to start
// without the token, and with it refuses pages and /metrics without it.
func TestServePrivate(t *testing.T) {
	storetest.Store(t) // the results store PGBISECT_DB points at
	cfg := filepath.Join(t.TempDir(), "pgbisect.yaml")
	if err := os.WriteFile(cfg, []byte("web:\n  private: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--config", cfg, "--state", t.TempDir()}
	t.Setenv(webTokenEnv, "")
	var stderr strings.Builder
	if code := Main(context.Background(), args, io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), "web.private: true, but "+webTokenEnv) {
		t.Fatalf("a private dashboard without a token: exit %d\n%s", code, stderr.String())
	}
	token := "tok-" + t.Name()
	t.Setenv(webTokenEnv, token)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	exit := make(chan int, 1)
	go func() {
		exit <- Main(ctx, args, io.Discard, pw)
		pw.Close()
	}()
	line, err := serveAddrLine(pr)
	if err != nil {
		t.Fatalf("reading serve's stderr: %v", err)
	}
	go io.Copy(io.Discard, pr) //nolint:errcheck // drain the rest
	m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serve said %q, want the loopback URL it serves on", line)
	}
	for _, tc := range []struct {
		path, auth string
		code       int
	}{{"/", "", 401}, {"/metrics", "", 401}, {"/metrics", "Bearer " + token, 200}, {"/", "Bearer " + token, 200}} {
		req, _ := http.NewRequest("GET", "http://"+m[1]+tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("GET %s with %q: %d, want %d", tc.path, tc.auth, resp.StatusCode, tc.code)
		}
	}
	cancel()
	if code := <-exit; code != 0 {
		t.Errorf("serve exited %d after its context ended", code)
	}
}

// serveAddrLine reads serve's stderr up to the line after the config line
// (printConfigLine), the one naming the address, and returns it (what it
// read beyond is dropped: the tests drain the rest).
func serveAddrLine(r io.Reader) (string, error) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "pgbisect: config ") {
			return line, err
		}
	}
}
