// Package githubtest is a fake GitHub for tests: an httptest server playing
// the REST endpoints of repository pg/bot that the bot uses, under a GitHub
// Enterprise style /api/v3/ prefix: the poster's (open issues by label, new
// issues, issue comments) and the intake's (comments, permissions,
// reactions, replies and their edits, pull requests' diffs). It checks the
// token on every request and JSON bodies strictly, answers unchanged
// comment lists with 304 to a matching If-None-Match, and plays canned
// failures queued per request.
package githubtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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

// Hub plays the GitHub endpoints the intake uses, with ETags:
// every list answer carries one, and a request with a matching
// If-None-Match gets 304 and is counted as free.
type Hub struct {
	t     testing.TB
	srv   *httptest.Server
	token string

	mu       sync.Mutex
	comments []Comment
	// Permissions maps logins to their permission on the repository
	// (default "read").
	Permissions map[string]string
	// Reactions are "commentID:content" in the order made.
	Reactions []string
	// Replies are the bodies of the bot's comments by ID, as last edited.
	Replies map[int64]string
	nextID  int64
	// Lists counts comment list requests; Free those answered 304.
	Lists, Free int
	// Edits counts edits of the bot's comments; with LimitEdits set, an
	// edit is refused for the primary rate limit (counted in Limited).
	Edits      int
	LimitEdits bool
	// IssueEdits counts edits of issue bodies (a finding updated after it
	// was posted).
	IssueEdits int
	Limited    int
	// Pulls are the diffs of pull requests by number (GET with the diff
	// media type); Diffs counts their fetches.
	Pulls map[int]string
	Diffs int

	// Labels are the bot's labels: open issues are listed by the first,
	// new issues must carry them all.
	Labels []string
	issues []*Issue
	// CheckBody, when set, checks the body of every issue and comment the
	// bot posts (a test failure is its to report).
	CheckBody func(body string)
	// BodiesSeen are the raw JSON bodies of the requests that had one.
	BodiesSeen []string
	fail       map[string][]func(http.ResponseWriter)
	// Outaged counts the requests answered by an outage (FailUntil).
	Outaged     int
	outage      func(http.ResponseWriter)
	outageUntil time.Time
	calls       []string
	deleted     map[int64]bool
}

// Issue is an issue (or pull request) on the fake. Comments are filled by
// Issues and Issue.
type Issue struct {
	Number   int
	Title    string
	Body     string
	Labels   []string
	State    string
	PR       bool
	Comments []Comment
}

// Comment is an issue comment on the fake.
type Comment struct {
	ID      int64
	Issue   int
	User    string
	Body    string
	Updated time.Time
}

// New starts a fake GitHub that accepts only token, closed when t ends.
func New(t testing.TB, token string) *Hub {
	h := &Hub{t: t, token: token, Permissions: map[string]string{}, Replies: map[int64]string{}, Pulls: map[int]string{}, nextID: 5000,
		Labels: []string{"pgbisect", "performance-regression"}, fail: map[string][]func(http.ResponseWriter){}, deleted: map[int64]bool{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

// RepoPath is the API path of the fake's repository, pg/bot.
const RepoPath = "/api/v3/repos/pg/bot/"

func (h *Hub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := r.Method + " " + r.URL.Path
	h.calls = append(h.calls, key)
	if got := r.Header.Get("Authorization"); got != "Bearer "+h.token {
		h.t.Errorf("%s: Authorization %q, want the bearer token", key, got)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	if h.outage != nil && time.Now().Before(h.outageUntil) {
		h.Outaged++
		h.outage(w)
		return
	}
	if q := h.fail[key]; len(q) > 0 {
		h.fail[key] = q[1:]
		q[0](w)
		return
	}
	repo := RepoPath
	path := r.URL.Path
	switch {
	case r.Method == "GET" && path == repo+"issues":
		q := r.URL.Query()
		if q.Get("state") != "open" || q.Get("labels") != h.Labels[0] || q.Get("per_page") != "100" {
			h.t.Errorf("listing issues with query %q, want state=open, labels=%s, per_page=100", r.URL.RawQuery, h.Labels[0])
		}
		out := []map[string]any{}
		for i := len(h.issues) - 1; i >= 0; i-- { // newest first
			is := h.issues[i]
			if is.State != "open" || !slices.Contains(is.Labels, h.Labels[0]) {
				continue
			}
			m := map[string]any{"number": is.Number, "title": is.Title, "body": is.Body, "state": is.State,
				"html_url": fmt.Sprintf("https://github.example/pg/bot/issues/%d", is.Number)}
			if is.PR {
				m["pull_request"] = map[string]string{"url": "https://github.example/pg/bot/pull/1"}
			}
			out = append(out, m)
		}
		writeJSON(w, http.StatusOK, out)
	case r.Method == "POST" && path == repo+"issues":
		var req struct {
			Title  string   `json:"title"`
			Body   string   `json:"body"`
			Labels []string `json:"labels"`
		}
		if !h.decode(w, r, &req) {
			return
		}
		if req.Title == "" || !slices.Equal(req.Labels, h.Labels) {
			h.t.Errorf("creating issue with title %q labels %v, want a title and labels %v", req.Title, req.Labels, h.Labels)
		}
		h.checkBody(req.Body)
		is := &Issue{Number: len(h.issues) + 1, Title: req.Title, Body: req.Body, Labels: req.Labels, State: "open"}
		h.issues = append(h.issues, is)
		writeJSON(w, http.StatusCreated, map[string]any{"number": is.Number, "title": is.Title, "body": is.Body,
			"html_url": fmt.Sprintf("https://github.example/pg/bot/issues/%d", is.Number)})
	case r.Method == "GET" && path == "/api/v3/user":
		writeJSON(w, http.StatusOK, map[string]any{"login": "pgbisect-bot"})
	case r.Method == "GET" && path == repo+"issues/comments":
		q := r.URL.Query()
		if q.Get("sort") != "updated" || q.Get("direction") != "asc" {
			h.t.Errorf("comments listed with %s, want sort=updated&direction=asc", r.URL.RawQuery)
		}
		var since time.Time
		if s := q.Get("since"); s != "" {
			var err error
			if since, err = time.Parse(time.RFC3339, s); err != nil {
				h.t.Errorf("since %q: %v", s, err)
			}
		}
		var out []map[string]any
		cs := slices.Clone(h.comments)
		slices.SortFunc(cs, func(a, b Comment) int { return a.Updated.Compare(b.Updated) })
		for _, c := range cs {
			if c.Updated.Before(since) {
				continue
			}
			out = append(out, map[string]any{"id": c.ID, "body": c.Body, "user": map[string]any{"login": c.User},
				"updated_at": c.Updated.Format(time.RFC3339), "created_at": c.Updated.Format(time.RFC3339),
				"issue_url": fmt.Sprintf("https://api.github.com/repos/pg/bot/issues/%d", c.Issue),
				"html_url":  fmt.Sprintf("https://github.com/pg/bot/issues/%d#issuecomment-%d", c.Issue, c.ID)})
		}
		b, _ := json.Marshal(out)
		sum := sha256.Sum256(append(b, r.URL.RawQuery...))
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		h.Lists++
		if r.Header.Get("If-None-Match") == etag {
			h.Free++
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	case r.Method == "GET" && strings.HasPrefix(path, repo+"issues/") && strings.HasSuffix(path, "/comments"):
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(path, repo+"issues/"), "/comments"))
		out := []map[string]any{}
		for _, c := range h.comments {
			if c.Issue == n {
				out = append(out, map[string]any{"id": c.ID, "body": c.Body, "user": map[string]any{"login": c.User},
					"updated_at": c.Updated.Format(time.RFC3339),
					"html_url":   fmt.Sprintf("https://github.example/pg/bot/issues/%d#issuecomment-%d", n, c.ID)})
			}
		}
		writeJSON(w, http.StatusOK, out)
	case r.Method == "GET" && strings.HasPrefix(path, repo+"pulls/"):
		n, _ := strconv.Atoi(strings.TrimPrefix(path, repo+"pulls/"))
		if got := r.Header.Get("Accept"); got != "application/vnd.github.v3.diff" {
			h.t.Errorf("pull request %d fetched with Accept %q, want the diff media type", n, got)
		}
		diff, ok := h.Pulls[n]
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
			return
		}
		h.Diffs++
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(diff))
	case r.Method == "GET" && strings.HasPrefix(path, repo+"collaborators/") && strings.HasSuffix(path, "/permission"):
		user := strings.TrimSuffix(strings.TrimPrefix(path, repo+"collaborators/"), "/permission")
		p, ok := h.Permissions[user]
		if !ok {
			p = "read"
		}
		// As GitHub answers: permission is the legacy level (maintain
		// reads as write, triage as read), role_name the role.
		legacy := map[string]string{"maintain": "write", "triage": "read"}[p]
		if legacy == "" {
			legacy = p
		}
		writeJSON(w, http.StatusOK, map[string]any{"permission": legacy, "role_name": p, "user": map[string]any{"login": user}})
	case r.Method == "POST" && strings.HasPrefix(path, repo+"issues/comments/") && strings.HasSuffix(path, "/reactions"):
		var body struct {
			Content string `json:"content"`
		}
		if !h.decode(w, r, &body) {
			return
		}
		h.Reactions = append(h.Reactions, strings.TrimSuffix(strings.TrimPrefix(path, repo+"issues/comments/"), "/reactions")+":"+body.Content)
		writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "content": body.Content})
	case r.Method == "POST" && strings.HasPrefix(path, repo+"issues/") && strings.HasSuffix(path, "/comments"):
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(path, repo+"issues/"), "/comments"))
		var body struct {
			Body string `json:"body"`
		}
		if !h.decode(w, r, &body) {
			return
		}
		h.checkBody(body.Body)
		h.nextID++
		h.Replies[h.nextID] = body.Body
		h.comments = append(h.comments, Comment{ID: h.nextID, Issue: n, User: "pgbisect-bot", Body: body.Body, Updated: h.latest().Add(time.Second)})
		writeJSON(w, http.StatusCreated, map[string]any{"id": h.nextID, "body": body.Body,
			"html_url": fmt.Sprintf("https://github.example/pg/bot/issues/%d#issuecomment-%d", n, h.nextID)})
	case r.Method == "PATCH" && strings.HasPrefix(path, repo+"issues/") && !strings.Contains(strings.TrimPrefix(path, repo+"issues/"), "/"):
		n, _ := strconv.Atoi(strings.TrimPrefix(path, repo+"issues/"))
		var req struct {
			Body string `json:"body"`
		}
		if !h.decode(w, r, &req) {
			return
		}
		if n < 1 || n > len(h.issues) {
			writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		h.checkBody(req.Body)
		is := h.issues[n-1]
		is.Body = req.Body
		h.IssueEdits++
		writeJSON(w, http.StatusOK, map[string]any{"number": is.Number, "title": is.Title, "body": is.Body,
			"html_url": fmt.Sprintf("https://github.example/pg/bot/issues/%d", is.Number)})
	case r.Method == "PATCH" && strings.HasPrefix(path, repo+"issues/comments/") && h.LimitEdits:
		h.Limited++
		RateLimited(time.Now().Add(time.Hour))(w)
	case r.Method == "PATCH" && strings.HasPrefix(path, repo+"issues/comments/"):
		id, _ := strconv.ParseInt(strings.TrimPrefix(path, repo+"issues/comments/"), 10, 64)
		if h.deleted[id] {
			writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		if _, ok := h.Replies[id]; !ok {
			h.t.Errorf("edit of comment %d, which is not the bot's", id)
		}
		var body struct {
			Body string `json:"body"`
		}
		if !h.decode(w, r, &body) {
			return
		}
		h.Replies[id] = body.Body
		h.Edits++
		for i, c := range h.comments {
			if c.ID == id {
				h.comments[i].Body = body.Body
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "body": body.Body})
	default:
		h.t.Errorf("unexpected request %s", key)
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
	}
}

// decode reads a JSON body strictly: an unknown field or another content
// type is a test failure.
func (h *Hub) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		h.t.Errorf("%s %s: Content-Type %q", r.Method, r.URL.Path, ct)
	}
	var buf bytes.Buffer
	buf.ReadFrom(r.Body)
	h.BodiesSeen = append(h.BodiesSeen, buf.String())
	dec := json.NewDecoder(&buf)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		h.t.Errorf("%s %s: bad JSON body: %v", r.Method, r.URL.Path, err)
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"})
		return false
	}
	return true
}

func (h *Hub) checkBody(body string) {
	if n := utf8.RuneCountInString(body); n == 0 || n > 65536 {
		h.t.Errorf("body of %d characters", n)
	}
	if h.CheckBody != nil {
		h.CheckBody(body)
	}
}

// DeleteComment deletes comment id, as someone on GitHub may.
func (h *Hub) DeleteComment(id int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deleted[id] = true
	delete(h.Replies, id)
	h.comments = slices.DeleteFunc(h.comments, func(c Comment) bool { return c.ID == id })
}

// AddIssue adds an issue (a pull request when pr) and returns its number.
func (h *Hub) AddIssue(title, body string, labels []string, state string, pr bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	is := &Issue{Number: len(h.issues) + 1, Title: title, Body: body, Labels: labels, State: state, PR: pr}
	h.issues = append(h.issues, is)
	return is.Number
}

// Issues returns the issues, oldest first, each with its comments.
func (h *Hub) Issues() []Issue {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Issue, len(h.issues))
	for i, is := range h.issues {
		out[i] = *is
		for _, c := range h.comments {
			if c.Issue == is.Number {
				out[i].Comments = append(out[i].Comments, c)
			}
		}
	}
	return out
}

// FailNext queues a failure for the next request "METHOD path" (path under
// RepoPath, e.g. "issues" or "issues/1/comments").
func (h *Hub) FailNext(method, path string, f func(http.ResponseWriter)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := method + " " + RepoPath + path
	h.fail[k] = append(h.fail[k], f)
}

// FailUntil answers every request with f until the time until: an outage
// (Status(502, ...)) or a stretch of rate limiting (RateLimited(until)).
// Requests answered so are counted in Outaged.
func (h *Hub) FailUntil(until time.Time, f func(http.ResponseWriter)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outage, h.outageUntil = f, until
}

// TakeCalls returns the requests made since the last call ("METHOD path").
func (h *Hub) TakeCalls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.calls
	h.calls = nil
	return c
}

func (h *Hub) latest() time.Time {
	t := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range h.comments {
		if c.Updated.After(t) {
			t = c.Updated
		}
	}
	return t
}

// Comment adds a comment, or edits the one with this ID.
func (h *Hub) Comment(id int64, issue int, user, body string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, c := range h.comments {
		if c.ID == id {
			h.comments[i].Body, h.comments[i].Updated = body, at
			return
		}
	}
	h.comments = append(h.comments, Comment{ID: id, Issue: issue, User: user, Body: body, Updated: at})
}

// URL is the API base URL ("http://127.0.0.1:N/api/v3/").
func (h *Hub) URL() string { return h.srv.URL + "/api/v3/" }

// Lock and Unlock guard the exported fields while the server runs.
func (h *Hub) Lock()   { h.mu.Lock() }
func (h *Hub) Unlock() { h.mu.Unlock() }

// Canned GitHub failures for FailNext, shaped like the real responses.

// RateLimited is the primary rate limit, reset at reset.
func RateLimited(reset time.Time) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "API rate limit exceeded for user ID 1.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"})
	}
}

// SecondaryRateLimited is the secondary rate limit, with Retry-After.
func SecondaryRateLimited(retryAfter int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "You have exceeded a secondary rate limit.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"})
	}
}

// Status answers code with message msg.
func Status(code int, msg string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		writeJSON(w, code, map[string]any{"message": msg})
	}
}

// Unprocessable is GitHub's 422 for a body too long.
func Unprocessable(w http.ResponseWriter) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
		"errors": []map[string]string{{"resource": "Issue", "code": "custom", "field": "body", "message": "body is too long"}}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
