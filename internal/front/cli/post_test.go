package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const postTestFinding = "../../../notify/testdata/regression-range.json"

// postFakeGitHub accepts listing and creating issues for pg/bot and counts
// the issues created.
func postFakeGitHub(t *testing.T) (url string, created func() int) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer test-token" {
			t.Errorf("%s %s without the token", r.Method, r.URL.Path)
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "GET /api/v3/repos/pg/bot/issues":
			w.Write([]byte("[]"))
		case "POST /api/v3/repos/pg/bot/issues":
			var req struct {
				Title, Body string
				Labels      []string
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !strings.HasPrefix(req.Title, "[master] 3c4d5e6f7a..00d1e02be2:") {
				t.Errorf("create issue: %v %q", err, req.Title)
			}
			n++
			w.WriteHeader(201)
			json.NewEncoder(w).Encode(map[string]any{"number": n, "html_url": "https://github.example/pg/bot/issues/1"})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			w.WriteHeader(404)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

func postMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestPostCommand posts a finding file through the real go-github client
// against a fake GitHub, then checks nothing is posted twice and the dry
// run shows what was posted.
func TestPostCommand(t *testing.T) {
	url, created := postFakeGitHub(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pgbisect.yaml")
	os.WriteFile(cfg, []byte("github:\n  repo: pg/bot\n  api_url: "+url+"/api/v3/\n"), 0o644)
	state := filepath.Join(dir, "state")
	t.Setenv("GITHUB_TOKEN", "test-token")

	code, out, errs := postMain(t, "post", "--dry-run", "--config", cfg, "--state", state, postTestFinding)
	if code != 0 || !strings.Contains(out, "Where:  create a new issue in pg/bot") || !strings.Contains(out, "Labels: pgbisect, performance-regression") ||
		!strings.Contains(out, "Title:  [master] 3c4d5e6f7a..00d1e02be2: copy-concurrent tps at clients=16 -26.9% regression") {
		t.Fatalf("dry run: code %d\n%s\n%s", code, out, errs)
	}
	if created() != 0 {
		t.Fatalf("the dry run posted")
	}

	code, out, errs = postMain(t, "post", "--config", cfg, "--state", state, postTestFinding)
	if code != 0 || !strings.Contains(out, "created issue #1") || created() != 1 {
		t.Fatalf("post: code %d, %d issues\n%s\n%s", code, created(), out, errs)
	}
	code, out, _ = postMain(t, "post", "--config", cfg, "--state", state, "20260131T020000Z-copy-concurrent-5e6f7a8b9c")
	if code != 0 || !strings.Contains(out, "already posted (created #1)") || created() != 1 {
		t.Errorf("posting again: code %d, %d issues\n%s", code, created(), out)
	}
	code, _, errs = postMain(t, "post", "--pending", "--config", cfg, "--state", state)
	if code != 0 || !strings.Contains(errs, "nothing pending") || created() != 1 {
		t.Errorf("--pending: code %d, %d issues\n%s", code, created(), errs)
	}

	if code, _, errs := postMain(t, "post", "--config", cfg); code != 2 || !strings.Contains(errs, "--pending") {
		t.Errorf("post without arguments: code %d, %s", code, errs)
	}
}

// TestReportCommand renders a finding file in each format.
func TestReportCommand(t *testing.T) {
	want, err := os.ReadFile(postTestFinding)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := postMain(t, "report", "--format", "json", postTestFinding)
	if code != 0 || out != string(want) {
		t.Errorf("report --format json: code %d, output differs from the file\n%s", code, errs)
	}
	code, out, _ = postMain(t, "report", "--format", "text", postTestFinding)
	if code != 0 || !strings.HasPrefix(out, "Subject: [master] 3c4d5e6f7a..00d1e02be2:") {
		t.Errorf("report --format text: code %d\n%.200s", code, out)
	}
	dir := t.TempDir()
	code, out, errs = postMain(t, "report", "--out", dir, postTestFinding)
	if code != 0 || !strings.Contains(out, "bisection.png") || !strings.Contains(out, "progress.svg") {
		t.Errorf("report --out: code %d\n%s\n%s", code, out, errs)
	}
	if code, _, _ := postMain(t, "report", "--format", "pdf", postTestFinding); code != 2 {
		t.Errorf("report --format pdf: code %d, want 2", code)
	}
}
