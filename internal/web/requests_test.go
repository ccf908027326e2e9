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

	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestRequests posts to /api/requests: only an authenticated, well-formed,
// valid request queues a job, and a failed one changes nothing.
func TestRequests(t *testing.T) {
	st := storetest.Store(t)
	const token = "s3cret-token"
	kind := "bisect-" + t.Name()
	enqueue := func(ctx context.Context, r Request) (int64, error) {
		if strings.HasSuffix(r.Scenario, "missing.yaml") {
			return 0, fmt.Errorf("%w: scenario %s: no such file", ErrInvalid, r.Scenario)
		}
		data, _ := json.Marshal(r)
		return st.Enqueue(ctx, kind, data)
	}
	srv, err := New(st, Config{Token: token, Enqueue: enqueue})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	queued := func() int {
		jobs, err := st.Jobs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, j := range jobs {
			if j.Kind == kind {
				n++
			}
		}
		return n
	}
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
	j, err := st.Job(context.Background(), out.ID)
	if err != nil || j.Kind != kind || j.Status != store.JobQueued || !strings.Contains(string(j.Args), "REL_16_0") {
		t.Fatalf("job %d: %+v %v", out.ID, j, err)
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
