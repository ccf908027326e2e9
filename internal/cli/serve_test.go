package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestServe runs "pgbisect serve" on a free port of the loopback address,
// fetches the overview and /metrics, and stops it by cancelling its context
// (what Ctrl-C does).
func TestServe(t *testing.T) {
	storetest.Store(t) // the results store PGBISECT_DB points at
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
	cancel()
	if code := <-exit; code != 0 {
		t.Errorf("serve exited %d after its context ended", code)
	}
}
