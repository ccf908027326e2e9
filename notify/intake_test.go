package notify

import (
	"github.com/google/go-github/v60/github"
	"github.com/pgbisect/pgbisect/notify/githubtest"

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
	"net/url"
	"slices"
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

func testIntake(t *testing.T, h *githubtest.Hub, cache ETagCache, allow ...string) *Intake {
	in, err := NewIntake(IntakeOptions{GitHubOptions: GitHubOptions{Repo: "pg/bot", APIURL: h.URL(),
		Labels: []string{"pgbisect"}, Token: testToken}, Allow: allow, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestPollReadsCommandsAndIdlePollsAreFree(t *testing.T) {
	h := githubtest.New(t, testToken)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	h.Comment(1, 42, "andres", "I think 9f8377f7a27 did it.\n@pgbisect bisect copy-concurrent --good A --bad B", t0)
	h.Comment(2, 42, "pgbisect-bot", "@pgbisect bisect copy-concurrent --good A --bad B\nqueued as job 7", t0.Add(time.Minute))
	h.Comment(3, 43, "tomas", "@pgbisect compare 'clog unlogged' A B\n@pgbisect status", t0.Add(2*time.Minute))
	cache := &memETags{}
	in := testIntake(t, h, cache)

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
	for _, poller := range []*Intake{in, in, testIntake(t, h, cache)} {
		again, _, err := poller.Poll(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) != 2 || again[0].CommentID != 3 || again[1].CommentID != 3 {
			t.Errorf("poll from the cursor: %+v (the comment at the cursor comes back; the caller's record skips it)", again)
		}
	}
	if h.Free != 2 || h.Lists != 4 {
		t.Errorf("%d of %d list requests were free, want 2 of 4 (the repeats of the poll from the cursor)", h.Free, h.Lists)
	}

	// An edited comment comes back with its new text.
	h.Comment(1, 42, "andres", "@pgbisect bisect copy-concurrent --good A --bad C", t0.Add(5*time.Minute))
	edited, _, err := in.Poll(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if len(edited) != 3 || edited[2].CommentID != 1 || edited[2].Args[5] != "C" {
		t.Errorf("after an edit: %+v", edited)
	}
}

func TestAuthorizedAndAnswers(t *testing.T) {
	h := githubtest.New(t, testToken)
	h.Permissions["andres"] = "write"
	h.Permissions["robert"] = "admin"
	in := testIntake(t, h, nil, "Tomas")
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
	if !slices.Equal(h.Reactions, []string{"1:eyes"}) || h.Replies[id] != "job 7: endpoints verified" {
		t.Errorf("reactions %v, replies %v", h.Reactions, h.Replies)
	}
}

func TestWebhook(t *testing.T) {
	h := githubtest.New(t, testToken)
	in := testIntake(t, h, nil)
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

// TestUneditable: gone, refused and rejected edits are final; rate limits
// and server errors are tried again.
func TestUneditable(t *testing.T) {
	resp := func(code int) *github.ErrorResponse {
		return &github.ErrorResponse{Response: &http.Response{StatusCode: code, Request: &http.Request{Method: "PATCH", URL: &url.URL{}}}}
	}
	for code, want := range map[int]bool{404: true, 410: true, 403: true, 422: true, 500: false, 502: false} {
		if got := Uneditable(fmt.Errorf("editing: %w", resp(code))); got != want {
			t.Errorf("%d: Uneditable %v, want %v", code, got, want)
		}
	}
	rl := &github.RateLimitError{Response: &http.Response{StatusCode: 403, Request: &http.Request{Method: "PATCH", URL: &url.URL{}}}}
	if Uneditable(rl) {
		t.Error("a rate limit counted as final")
	}
	if Uneditable(errors.New("connection reset")) {
		t.Error("a network error counted as final")
	}
}
