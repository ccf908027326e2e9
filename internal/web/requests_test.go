package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/jobs"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestRequests posts to /api/requests: only an authenticated, well-formed,
// valid request queues a job, and a failed one changes nothing.
func TestRequests(t *testing.T) {
	st := storetest.Store(t)
	const token = "s3cret-token"
	const class = "web-requests" // no daemon of these tests takes its jobs
	queue, err := jobs.NewQueue(st)
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(ctx context.Context, r Request) (int64, error) {
		if strings.HasSuffix(r.Scenario, "missing.yaml") {
			return 0, fmt.Errorf("%w: scenario %s: no such file", ErrInvalid, r.Scenario)
		}
		row, err := queue.Enqueue(ctx, app.BisectRequest{Scenario: r.Scenario, Good: r.Good, Bad: r.Bad, Metric: r.Metric, Point: r.Point}, class)
		if err != nil {
			return 0, err
		}
		return row.ID, nil
	}
	classJobs := func() []jobs.Job {
		all, err := queue.Jobs(context.Background(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		var out []jobs.Job
		for _, j := range all {
			if j.Class == class {
				out = append(out, j)
			}
		}
		return out
	}
	srv, err := New(st, Config{Token: token, Enqueue: enqueue})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	queued := func() int { return len(classJobs()) }
	good := `{"kind": "bisect", "scenario": "configs/scenarios/copy-single.yaml", "good": "REL_15_0", "bad": "REL_16_0"}`
	for _, tc := range []struct {
		name, auth, body string
		header           map[string]string
		code             int
		want             string
	}{
		{"no token", "", good, nil, 401, "authentication required"},
		{"wrong token", "Bearer nope", good, nil, 401, "authentication required"},
		{"basic auth", "Basic " + token, good, nil, 401, "authentication required"},
		{"cross-site browser", "Bearer " + token, good, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, ""},
		{"not JSON", "Bearer " + token, "kind=bisect", nil, 400, "not a JSON request object"},
		{"unknown field", "Bearer " + token, `{"kind": "bisect", "goood": "x"}`, nil, 400, `unknown field \"goood\"`},
		{"wrong type", "Bearer " + token, `{"kind": "bisect", "good": 15}`, nil, 400, `field \"good\": want a string`},
		{"missing bad", "Bearer " + token, `{"kind": "bisect", "scenario": "s.yaml", "good": "a"}`, nil, 400, `field \"bad\" is required`},
		{"wrong kind", "Bearer " + token, `{"kind": "compare", "scenario": "s.yaml", "good": "a", "bad": "b"}`, nil, 400, `field \"kind\"`},
		{"invalid", "Bearer " + token, `{"kind": "bisect", "scenario": "missing.yaml", "good": "a", "bad": "b"}`, nil, 400, "no such file"},
	} {
		req, _ := http.NewRequest("POST", ts.URL+"/api/requests", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, resp.StatusCode, body, tc.code, tc.want)
		}
		if strings.Contains(string(body), token) {
			t.Errorf("%s: the answer shows the token", tc.name)
		}
		if n := queued(); n != 0 {
			t.Fatalf("%s: a failed request queued %d jobs", tc.name, n)
		}
	}

	req, _ := http.NewRequest("POST", ts.URL+"/api/requests", strings.NewReader(good))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ID   int64  `json:"id"`
		Kind string `json:"kind"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 201 || out.Kind != "bisect" {
		t.Fatalf("%d %+v %v", resp.StatusCode, out, err)
	}
	got := classJobs()
	if len(got) != 1 || got[0].ID != out.ID || got[0].Kind != "bisect" || got[0].State != "available" || !strings.Contains(string(got[0].Args), "REL_16_0") {
		t.Fatalf("job %d: %+v", out.ID, got)
	}
	if _, err := queue.Cancel(context.Background(), out.ID); err != nil {
		t.Fatal(err)
	}
}

// TestRequestsDisabled: without a token the dashboard takes no writes.
func TestRequestsDisabled(t *testing.T) {
	st := storetest.Store(t)
	srv, err := New(st, Config{Enqueue: func(context.Context, Request) (int64, error) {
		t.Fatal("enqueued on a dashboard without a token")
		return 0, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/api/requests", strings.NewReader(`{}`))
	r.Header.Set("Authorization", "Bearer ")
	srv.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "PGBISECT_WEB_TOKEN") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}
