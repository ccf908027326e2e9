// Package githubtest is a fake GitHub for tests: an httptest server playing
// the REST endpoints the bot's intake uses (comments, permissions,
// reactions, replies and their edits, pull requests' diffs), checking the
// token on every request and answering unchanged lists with 304 to a
// matching If-None-Match.
package githubtest

import (
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
	Limited    int
	// Pulls are the diffs of pull requests by number (GET with the diff
	// media type); Diffs counts their fetches.
	Pulls map[int]string
	Diffs int
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
	h := &Hub{t: t, token: token, Permissions: map[string]string{}, Replies: map[int64]string{}, Pulls: map[int]string{}, nextID: 5000}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *Hub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if got := r.Header.Get("Authorization"); got != "Bearer "+h.token {
		h.t.Errorf("%s %s: Authorization %q", r.Method, r.URL.Path, got)
		http.Error(w, "bad credentials", http.StatusUnauthorized)
		return
	}
	repo := "/api/v3/repos/pg/bot/"
	path := r.URL.Path
	switch {
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
					"updated_at": c.Updated.Format(time.RFC3339)})
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
		writeJSON(w, http.StatusOK, map[string]any{"permission": p, "user": map[string]any{"login": user}})
	case r.Method == "POST" && strings.HasPrefix(path, repo+"issues/comments/") && strings.HasSuffix(path, "/reactions"):
		var body struct{ Content string }
		json.NewDecoder(r.Body).Decode(&body)
		h.Reactions = append(h.Reactions, strings.TrimSuffix(strings.TrimPrefix(path, repo+"issues/comments/"), "/reactions")+":"+body.Content)
		writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "content": body.Content})
	case r.Method == "POST" && strings.HasPrefix(path, repo+"issues/") && strings.HasSuffix(path, "/comments"):
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(path, repo+"issues/"), "/comments"))
		var body struct{ Body string }
		json.NewDecoder(r.Body).Decode(&body)
		h.nextID++
		h.Replies[h.nextID] = body.Body
		h.comments = append(h.comments, Comment{ID: h.nextID, Issue: n, User: "pgbisect-bot", Body: body.Body, Updated: h.latest().Add(time.Second)})
		writeJSON(w, http.StatusCreated, map[string]any{"id": h.nextID, "body": body.Body})
	case r.Method == "PATCH" && strings.HasPrefix(path, repo+"issues/comments/") && h.LimitEdits:
		h.Limited++
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "API rate limit exceeded"})
	case r.Method == "PATCH" && strings.HasPrefix(path, repo+"issues/comments/"):
		id, _ := strconv.ParseInt(strings.TrimPrefix(path, repo+"issues/comments/"), 10, 64)
		if _, ok := h.Replies[id]; !ok {
			h.t.Errorf("edit of comment %d, which is not the bot's", id)
		}
		var body struct{ Body string }
		json.NewDecoder(r.Body).Decode(&body)
		h.Replies[id] = body.Body
		h.Edits++
		for i, c := range h.comments {
			if c.ID == id {
				h.comments[i].Body = body.Body
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "body": body.Body})
	default:
		h.t.Errorf("unexpected %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	}
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

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
