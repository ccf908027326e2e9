package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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

func TestCommands(t *testing.T) {
	body := "Thanks! Could you\n" +
		"@pgbisect bisect copy-concurrent --good 1cbbee0338 --bad 00d1e02be2 --point clients=4\n" +
		"> @pgbisect status\n" + // quoted: someone else's request
		"```\n@pgbisect cancel 7\n```\n" + // an example in a code block
		"    @pgbisect cancel 8\n" + // indented code
		"~~~sh\n@pgbisect cancel 9\n~~~\n" +
		"@pgbisectfan says hi\n" +
		"  @pgbisect   status  \n"
	got := Commands(body, "@pgbisect")
	want := []string{"bisect copy-concurrent --good 1cbbee0338 --bad 00d1e02be2 --point clients=4", "status"}
	if !slices.Equal(got, want) {
		t.Errorf("Commands = %q, want %q", got, want)
	}
}

func TestSplitArgs(t *testing.T) {
	for in, want := range map[string][]string{
		`compare copy-single A B`:             {"compare", "copy-single", "A", "B"},
		`run x --set 'rows=1,2' --note "a b"`: {"run", "x", "--set", "rows=1,2", "--note", "a b"},
		`a "say \"hi\"" b\ c`:                 {"a", `say "hi"`, "b c"},
		`  spaced   out  `:                    {"spaced", "out"},
		`""`:                                  {""},
	} {
		got, err := SplitArgs(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SplitArgs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`a 'b`, `a "b`} {
		if _, err := SplitArgs(in); err == nil || !strings.Contains(err.Error(), "unclosed") {
			t.Errorf("SplitArgs(%q): %v, want an unclosed quote error", in, err)
		}
	}
}

// fakeIntakeHub plays the GitHub endpoints the intake uses, with ETags:
// every list answer carries one, and a request with a matching
// If-None-Match gets 304 and is counted as free.
type fakeIntakeHub struct {
	t   *testing.T
	srv *httptest.Server

	mu          sync.Mutex
	comments    []fakeRepoComment
	permissions map[string]string
	reactions   []string
	replies     map[int64]string
	nextID      int64
	lists, free int
}

type fakeRepoComment struct {
	ID      int64
	Issue   int
	User    string
	Body    string
	Updated time.Time
}

func newFakeIntakeHub(t *testing.T) *fakeIntakeHub {
	h := &fakeIntakeHub{t: t, permissions: map[string]string{}, replies: map[int64]string{}, nextID: 5000}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *fakeIntakeHub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if got := r.Header.Get("Authorization"); got != "Bearer "+testToken {
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
		slices.SortFunc(cs, func(a, b fakeRepoComment) int { return a.Updated.Compare(b.Updated) })
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
		h.lists++
		if r.Header.Get("If-None-Match") == etag {
			h.free++
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	case r.Method == "GET" && strings.HasPrefix(path, repo+"collaborators/") && strings.HasSuffix(path, "/permission"):
		user := strings.TrimSuffix(strings.TrimPrefix(path, repo+"collaborators/"), "/permission")
		p, ok := h.permissions[user]
		if !ok {
			p = "read"
		}
		writeJSON(w, http.StatusOK, map[string]any{"permission": p, "user": map[string]any{"login": user}})
	case r.Method == "POST" && strings.HasPrefix(path, repo+"issues/comments/") && strings.HasSuffix(path, "/reactions"):
		var body struct{ Content string }
		json.NewDecoder(r.Body).Decode(&body)
		h.reactions = append(h.reactions, strings.TrimSuffix(strings.TrimPrefix(path, repo+"issues/comments/"), "/reactions")+":"+body.Content)
		writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "content": body.Content})
	case r.Method == "POST" && strings.HasPrefix(path, repo+"issues/") && strings.HasSuffix(path, "/comments"):
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(path, repo+"issues/"), "/comments"))
		var body struct{ Body string }
		json.NewDecoder(r.Body).Decode(&body)
		h.nextID++
		h.replies[h.nextID] = body.Body
		h.comments = append(h.comments, fakeRepoComment{ID: h.nextID, Issue: n, User: "pgbisect-bot", Body: body.Body, Updated: h.latest().Add(time.Second)})
		writeJSON(w, http.StatusCreated, map[string]any{"id": h.nextID, "body": body.Body})
	case r.Method == "PATCH" && strings.HasPrefix(path, repo+"issues/comments/"):
		id, _ := strconv.ParseInt(strings.TrimPrefix(path, repo+"issues/comments/"), 10, 64)
		if _, ok := h.replies[id]; !ok {
			h.t.Errorf("edit of comment %d, which is not the bot's", id)
		}
		var body struct{ Body string }
		json.NewDecoder(r.Body).Decode(&body)
		h.replies[id] = body.Body
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "body": body.Body})
	default:
		h.t.Errorf("unexpected %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	}
}

func (h *fakeIntakeHub) latest() time.Time {
	t := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range h.comments {
		if c.Updated.After(t) {
			t = c.Updated
		}
	}
	return t
}

func (h *fakeIntakeHub) comment(id int64, issue int, user, body string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, c := range h.comments {
		if c.ID == id {
			h.comments[i].Body, h.comments[i].Updated = body, at
			return
		}
	}
	h.comments = append(h.comments, fakeRepoComment{ID: id, Issue: issue, User: user, Body: body, Updated: at})
}

// memETags is an in-memory ETagCache (the store keeps the real one).
type memETags struct {
	mu sync.Mutex
	m  map[string][2]string
}

func (c *memETags) ETag(_ context.Context, key string) (string, []byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v[0], []byte(v[1]), ok, nil
}

func (c *memETags) PutETag(_ context.Context, key, etag string, body []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][2]string{}
	}
	c.m[key] = [2]string{etag, string(body)}
	return nil
}

func (h *fakeIntakeHub) intake(t *testing.T, cache ETagCache, allow ...string) *Intake {
	in, err := NewIntake(IntakeOptions{GitHubOptions: GitHubOptions{Repo: "pg/bot", APIURL: h.srv.URL + "/api/v3/",
		Labels: []string{"pgbisect"}, Token: testToken}, Allow: allow, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestPollReadsCommandsAndIdlePollsAreFree(t *testing.T) {
	h := newFakeIntakeHub(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	h.comment(1, 42, "andres", "I think 9f8377f7a27 did it.\n@pgbisect bisect copy-concurrent --good A --bad B", t0)
	h.comment(2, 42, "pgbisect-bot", "@pgbisect bisect copy-concurrent --good A --bad B\nqueued as job 7", t0.Add(time.Minute))
	h.comment(3, 43, "tomas", "@pgbisect compare 'clog unlogged' A B\n@pgbisect status", t0.Add(2*time.Minute))
	cache := &memETags{}
	in := h.intake(t, cache)

	ms, next, err := in.Poll(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, m := range ms {
		lines = append(lines, fmt.Sprintf("%d #%d %s: %q", m.CommentID, m.Issue, m.User, m.Args))
	}
	want := []string{`1 #42 andres: ["bisect" "copy-concurrent" "--good" "A" "--bad" "B"]`,
		`3 #43 tomas: ["compare" "clog unlogged" "A" "B"]`, `3 #43 tomas: ["status"]`}
	if !slices.Equal(lines, want) {
		t.Errorf("mentions:\n%s\nwant (the bot's own comment skipped):\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if !next.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("cursor %v, want the newest update %v", next, t0.Add(2*time.Minute))
	}

	// Nothing changed: the next polls are answered 304 and cost nothing,
	// and a new Intake with the same cache (a restarted bot) polls free too.
	for _, poller := range []*Intake{in, in, h.intake(t, cache)} {
		again, _, err := poller.Poll(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) != 2 || again[0].CommentID != 3 || again[1].CommentID != 3 {
			t.Errorf("poll from the cursor: %+v (the comment at the cursor comes back; the caller's record skips it)", again)
		}
	}
	if h.free != 2 || h.lists != 4 {
		t.Errorf("%d of %d list requests were free, want 2 of 4 (the repeats of the poll from the cursor)", h.free, h.lists)
	}

	// An edited comment comes back with its new text.
	h.comment(1, 42, "andres", "@pgbisect bisect copy-concurrent --good A --bad C", t0.Add(5*time.Minute))
	edited, _, err := in.Poll(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if len(edited) != 3 || edited[2].CommentID != 1 || edited[2].Args[5] != "C" {
		t.Errorf("after an edit: %+v", edited)
	}
}

func TestAuthorizedAndAnswers(t *testing.T) {
	h := newFakeIntakeHub(t)
	h.permissions["andres"] = "write"
	h.permissions["robert"] = "admin"
	in := h.intake(t, nil, "Tomas")
	ctx := context.Background()
	for user, want := range map[string]bool{"andres": true, "robert": true, "tomas": true, "stranger": false} {
		ok, why, err := in.Authorized(ctx, user)
		if err != nil || ok != want {
			t.Errorf("%s: %v (%s), %v; want %v", user, ok, why, err, want)
		}
		if user == "stranger" && why != "read permission on pg/bot" {
			t.Errorf("refusal reason %q", why)
		}
	}
	if err := in.React(ctx, 1, "eyes"); err != nil {
		t.Fatal(err)
	}
	id, err := in.Reply(ctx, 42, "queued as job 7")
	if err != nil {
		t.Fatal(err)
	}
	if err := in.EditReply(ctx, id, "job 7: endpoints verified"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.reactions, []string{"1:eyes"}) || h.replies[id] != "job 7: endpoints verified" {
		t.Errorf("reactions %v, replies %v", h.reactions, h.replies)
	}
}

func TestWebhook(t *testing.T) {
	h := newFakeIntakeHub(t)
	in := h.intake(t, nil)
	secret := []byte("s3cret")
	payload := func(user, action string) []byte {
		b, _ := json.Marshal(map[string]any{"action": action,
			"repository": map[string]any{"full_name": "pg/bot"},
			"issue":      map[string]any{"number": 42},
			"comment": map[string]any{"id": 99, "body": "@pgbisect status", "user": map[string]any{"login": user},
				"updated_at": "2026-11-30T10:00:00Z", "html_url": "https://github.com/pg/bot/issues/42#issuecomment-99"}})
		return b
	}
	request := func(body []byte, key []byte, event string) *http.Request {
		r := httptest.NewRequest("POST", "/github/webhook", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-GitHub-Event", event)
		r.Header.Set("X-GitHub-Delivery", "d-1")
		mac := hmac.New(sha256.New, key)
		mac.Write(body)
		r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		return r
	}
	ctx := context.Background()
	delivery, ms, err := in.Webhook(ctx, request(payload("andres", "created"), secret, "issue_comment"), secret)
	if err != nil || delivery != "d-1" || len(ms) != 1 || ms[0].Issue != 42 || ms[0].CommentID != 99 || ms[0].Args[0] != "status" {
		t.Errorf("good delivery: %q %+v %v", delivery, ms, err)
	}
	if _, _, err := in.Webhook(ctx, request(payload("andres", "created"), []byte("guess"), "issue_comment"), secret); !errors.Is(err, ErrBadSignature) {
		t.Errorf("bad signature: %v, want ErrBadSignature", err)
	}
	for _, c := range []struct{ user, action, event string }{{"pgbisect-bot", "created", "issue_comment"},
		{"andres", "deleted", "issue_comment"}, {"andres", "created", "ping"}} {
		_, ms, err := in.Webhook(ctx, request(payload(c.user, c.action), secret, c.event), secret)
		if err != nil || len(ms) != 0 {
			t.Errorf("%+v: %+v %v, want nothing to do", c, ms, err)
		}
	}
}
