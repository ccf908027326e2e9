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
	"time"

	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestRequests posts to /api/requests: only an authenticated, well-formed,
// valid request queues a job, and a failed one changes nothing.
func TestRequests(t *testing.T) {
	st := storetest.Store(t)
	const token = "s3cret-token"
	const class = "web-requests" // no daemon of these tests takes its jobs
	queue := newTestQueue(t, st, class)
	enqueue := queue.enqueue(func(r Request) error {
		if strings.HasSuffix(r.Scenario, "missing.yaml") {
			return fmt.Errorf("%w: scenario %s: no such file", ErrInvalid, r.Scenario)
		}
		return nil
	})
	classJobs := queue.jobs
	srv, err := New(st, Config{Token: token, Enqueue: EnqueueFunc(enqueue)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	queued := func() int { return len(classJobs()) }
	// A session made with another token, and this one's read session,
	// do not write.
	otherSrv, err := New(st, Config{Token: "another-token"})
	if err != nil {
		t.Fatal(err)
	}
	other := otherSrv.sessionValue("write", time.Now().Add(time.Hour))
	readSession := srv.sessionValue("read", time.Now().Add(time.Hour))
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
		{"missing bad", "Bearer " + token, `{"kind": "bisect", "scenario": "s.yaml", "good": "a"}`, nil, 400, `field \"bad\": required`},
		{"wrong kind", "Bearer " + token, `{"kind": "run", "scenario": "s.yaml", "good": "a", "bad": "b"}`, nil, 400, `field \"kind\"`},
		{"compare with good", "Bearer " + token, `{"kind": "compare", "scenario": "s.yaml", "good": "a", "bad": "b"}`, nil, 400, `field \"a\": required`},
		{"compare with metric", "Bearer " + token, `{"kind": "compare", "scenario": "s.yaml", "a": "x", "b": "y", "metric": "tps"}`, nil, 400, `field \"metric\": not part of a compare request`},
		{"bisect with b", "Bearer " + token, `{"kind": "bisect", "scenario": "s.yaml", "good": "x", "bad": "y", "b": "z"}`, nil, 400, `field \"b\"`},
		{"min effect", "Bearer " + token, `{"kind": "compare", "scenario": "s.yaml", "a": "x", "b": "y", "min_effect": 5}`, nil, 400, `field \"min_effect\": 5 is out of range`},
		{"max samples", "Bearer " + token, `{"kind": "compare", "scenario": "s.yaml", "a": "x", "b": "y", "max_samples": -1}`, nil, 400, `field \"max_samples\"`},
		{"trailing", "Bearer " + token, good + " {}", nil, 400, "more than one JSON value"},
		{"session of another token", "", good, map[string]string{"Cookie": writeCookie + "=" + other}, 401, "authentication required"},
		{"read session", "", good, map[string]string{"Cookie": readCookie + "=" + readSession}, 401, "authentication required"},
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

	// A bisection with the bearer token, a comparison with the browser's
	// write session.
	compare := `{"kind": "compare", "scenario": "configs/scenarios/copy-single.yaml", "a": "REL_16_0", "b": "REL_17_0", "min_effect": 0.05}`
	for _, tc := range []struct{ kind, body, header, value string }{
		{"bisect", good, "Authorization", "Bearer " + token},
		{"compare", compare, "Cookie", writeCookie + "=" + srv.sessionValue("write", time.Now().Add(time.Hour))},
	} {
		req, _ := http.NewRequest("POST", ts.URL+"/api/requests", strings.NewReader(tc.body))
		req.Header.Set(tc.header, tc.value)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			ID   int64  `json:"id"`
			Kind string `json:"kind"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 201 || out.Kind != tc.kind {
			t.Fatalf("%s: %d %+v %v", tc.kind, resp.StatusCode, out, err)
		}
		got := classJobs()
		if len(got) != 1 || got[0].ID != out.ID || got[0].Kind != tc.kind || got[0].State != "available" || !strings.Contains(string(got[0].Args), "REL_16_0") {
			t.Fatalf("job %d: %+v", out.ID, got)
		}
		if _, err := queue.q.Cancel(context.Background(), out.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRequestsDisabled: without a token the dashboard takes no writes.
func TestRequestsDisabled(t *testing.T) {
	st := storetest.Store(t)
	srv, err := New(st, Config{Enqueue: EnqueueFunc(func(context.Context, Request) (int64, error) {
		t.Fatal("enqueued on a dashboard without a token")
		return 0, nil
	})})
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
