package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// fakeGitHub is an httptest server playing the four GitHub REST endpoints
// the poster uses, under a GitHub Enterprise style /api/v3/ prefix. It
// checks every request (method, path, query, Authorization header, JSON
// body) and keeps issues and comments in memory. Canned failures are queued
// per "METHOD path" and consumed one per request.
type fakeGitHub struct {
	t      *testing.T
	srv    *httptest.Server
	token  string
	labels []string

	mu       sync.Mutex
	issues   []*fakeIssue
	nextID   int64
	fail     map[string][]func(http.ResponseWriter)
	calls    []string
	bodySeen []string // bodies of POST requests, to check the token never leaks
}

type fakeIssue struct {
	Number   int
	Title    string
	Body     string
	Labels   []string
	State    string
	PR       bool
	Comments []fakeComment
}

type fakeComment struct {
	ID   int64
	Body string
}

const (
	testToken = "ghp_testTOKENnever_to_be_seen"
	basePath  = "/api/v3/repos/pg/bot/issues"
)

func newFakeGitHub(t *testing.T) *fakeGitHub {
	g := &fakeGitHub{t: t, token: testToken, labels: []string{"pgbisect", "performance-regression"}, nextID: 1000,
		fail: map[string][]func(http.ResponseWriter){}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

// poster returns a Poster for the fake with a fake clock that starts at a
// fixed instant in the past and advances only when the poster sleeps.
func (g *fakeGitHub) poster(t *testing.T) (*Poster, *[]time.Duration) {
	p, err := NewPoster(GitHubOptions{Repo: "pg/bot", APIURL: g.srv.URL + "/api/v3/", Labels: g.labels, Token: g.token,
		ReportURL: "https://pgbisect.example.org/reports"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	var sleeps []time.Duration
	p.Now = func() time.Time { return now }
	p.Sleep = func(ctx context.Context, d time.Duration) error {
		sleeps = append(sleeps, d)
		now = now.Add(d)
		return ctx.Err()
	}
	return p, &sleeps
}

// failNext queues a failure for the next request to "METHOD path" (path
// relative to /api/v3/repos/pg/bot/issues, "" for the collection).
func (g *fakeGitHub) failNext(method, path string, f func(http.ResponseWriter)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := method + " " + basePath + path
	g.fail[k] = append(g.fail[k], f)
}

func (g *fakeGitHub) takeCalls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.calls
	g.calls = nil
	return c
}

func (g *fakeGitHub) addIssue(title, body string, labels []string, state string, pr bool) *fakeIssue {
	g.mu.Lock()
	defer g.mu.Unlock()
	is := &fakeIssue{Number: len(g.issues) + 1, Title: title, Body: body, Labels: labels, State: state, PR: pr}
	g.issues = append(g.issues, is)
	return is
}

func (g *fakeGitHub) issue(n int) *fakeIssue {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.issues[n-1]
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func (g *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	t := g.t
	g.mu.Lock()
	defer g.mu.Unlock()
	key := r.Method + " " + r.URL.Path
	g.calls = append(g.calls, key)
	if got := r.Header.Get("Authorization"); got != "Bearer "+g.token {
		t.Errorf("%s: Authorization header %q, want the bearer token", key, got)
		writeJSON(w, 401, map[string]string{"message": "Bad credentials"})
		return
	}
	if q := g.fail[key]; len(q) > 0 {
		g.fail[key] = q[1:]
		q[0](w)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, basePath)
	if !ok {
		t.Errorf("unexpected request %s", key)
		writeJSON(w, 404, map[string]string{"message": "Not Found"})
		return
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	switch {
	case r.Method == "GET" && rest == "":
		q := r.URL.Query()
		if q.Get("state") != "open" || q.Get("labels") != g.labels[0] || q.Get("per_page") != "100" {
			t.Errorf("listing issues with query %q, want state=open, labels=%s, per_page=100", r.URL.RawQuery, g.labels[0])
		}
		out := []map[string]any{}
		for i := len(g.issues) - 1; i >= 0; i-- { // newest first
			is := g.issues[i]
			if is.State != "open" || !slices.Contains(is.Labels, g.labels[0]) {
				continue
			}
			m := map[string]any{"number": is.Number, "title": is.Title, "body": is.Body, "state": is.State,
				"html_url": fmt.Sprintf("https://github.example/pg/bot/issues/%d", is.Number)}
			if is.PR {
				m["pull_request"] = map[string]string{"url": "https://github.example/pg/bot/pull/1"}
			}
			out = append(out, m)
		}
		writeJSON(w, 200, out)
	case r.Method == "POST" && rest == "":
		var req struct {
			Title  string   `json:"title"`
			Body   string   `json:"body"`
			Labels []string `json:"labels"`
		}
		if !g.decode(w, r, &req) {
			return
		}
		if req.Title == "" || !slices.Equal(req.Labels, g.labels) {
			t.Errorf("creating issue with title %q labels %v, want a title and labels %v", req.Title, req.Labels, g.labels)
		}
		g.checkBody(req.Body)
		is := &fakeIssue{Number: len(g.issues) + 1, Title: req.Title, Body: req.Body, Labels: req.Labels, State: "open"}
		g.issues = append(g.issues, is)
		writeJSON(w, 201, map[string]any{"number": is.Number, "title": is.Title, "body": is.Body,
			"html_url": fmt.Sprintf("https://github.example/pg/bot/issues/%d", is.Number)})
	case len(parts) == 2 && parts[1] == "comments":
		n, err := strconv.Atoi(parts[0])
		if err != nil || n < 1 || n > len(g.issues) {
			t.Errorf("%s: no such issue", key)
			writeJSON(w, 404, map[string]string{"message": "Not Found"})
			return
		}
		is := g.issues[n-1]
		if r.Method == "GET" {
			out := []map[string]any{}
			for _, c := range is.Comments {
				out = append(out, map[string]any{"id": c.ID, "body": c.Body,
					"html_url": fmt.Sprintf("https://github.example/pg/bot/issues/%d#issuecomment-%d", n, c.ID)})
			}
			writeJSON(w, 200, out)
			return
		}
		var req struct {
			Body string `json:"body"`
		}
		if !g.decode(w, r, &req) {
			return
		}
		g.checkBody(req.Body)
		g.nextID++
		is.Comments = append(is.Comments, fakeComment{ID: g.nextID, Body: req.Body})
		writeJSON(w, 201, map[string]any{"id": g.nextID, "body": req.Body,
			"html_url": fmt.Sprintf("https://github.example/pg/bot/issues/%d#issuecomment-%d", n, g.nextID)})
	default:
		t.Errorf("unexpected request %s", key)
		writeJSON(w, 404, map[string]string{"message": "Not Found"})
	}
}

// decode reads a JSON body strictly: an unknown field is a test failure.
func (g *fakeGitHub) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		g.t.Errorf("%s %s: Content-Type %q", r.Method, r.URL.Path, ct)
	}
	var buf bytes.Buffer
	buf.ReadFrom(r.Body)
	g.bodySeen = append(g.bodySeen, buf.String())
	dec := json.NewDecoder(&buf)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		g.t.Errorf("%s %s: bad JSON body: %v", r.Method, r.URL.Path, err)
		writeJSON(w, 400, map[string]string{"message": "Problems parsing JSON"})
		return false
	}
	return true
}

func (g *fakeGitHub) checkBody(body string) {
	if n := utf8.RuneCountInString(body); n == 0 || n > 65536 {
		g.t.Errorf("body of %d characters", n)
	}
	if !strings.HasPrefix(body, "<!-- pgbisect finding=") {
		g.t.Errorf("body does not start with the pgbisect marker: %.80q", body)
	}
}

// Canned GitHub failures, shaped like the real responses.

func rateLimited(reset time.Time) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		writeJSON(w, 403, map[string]string{"message": "API rate limit exceeded for user ID 1.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"})
	}
}

func secondaryRateLimited(retryAfter int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		writeJSON(w, 403, map[string]string{"message": "You have exceeded a secondary rate limit.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"})
	}
}

func status(code int, msg string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		writeJSON(w, code, map[string]any{"message": msg})
	}
}

func unprocessable(w http.ResponseWriter) {
	writeJSON(w, 422, map[string]any{"message": "Validation Failed",
		"errors": []map[string]string{{"resource": "Issue", "code": "custom", "field": "body", "message": "body is too long"}}})
}
