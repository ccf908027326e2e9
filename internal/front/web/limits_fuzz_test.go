package web

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/internal/testkit/fuzztest"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/notify/githubtest"
	"github.com/pgbisect/pgbisect/store"
)

// FuzzLoginRedirect signs in with the token and a fuzzed next: the 303's
// Location, read the way a browser reads it (tabs and newlines dropped,
// backslashes taken for slashes), resolved against the dashboard's address,
// is always on the dashboard, and it is next itself or "/".
func FuzzLoginRedirect(f *testing.F) {
	for _, s := range []string{"/request", "/findings/abc?x=1#y", "//evil.example/x", "https://evil.example/", "/\\evil", "/\t/evil",
		"\\\\evil", "/%2F/evil", "http:evil", "/..//evil", "javascript:alert(1)", "/ok/../..//evil", " //evil", "/\r\n/evil", "", "?next=//x"} {
		f.Add(s)
	}
	const token = "fuzz-login-token"
	srv, err := New(nil, Config{Token: token})
	if err != nil {
		f.Fatal(err)
	}
	base, _ := url.Parse("http://dash.example:8080/login")
	f.Fuzz(func(t *testing.T, next string) {
		w := httptest.NewRecorder()
		fuzztest.Within(t, func() {
			r := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"token": {token}, "next": {next}}.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			srv.ServeHTTP(w, r)
		})
		if w.Code != http.StatusSeeOther {
			t.Fatalf("signing in: %d, want 303\n%s", w.Code, w.Body)
		}
		loc := w.Header().Get("Location")
		browser := strings.Map(func(r rune) rune {
			switch r {
			case '\t', '\n', '\r':
				return -1
			case '\\':
				return '/'
			}
			return r
		}, strings.TrimLeft(loc, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f "))
		u, err := url.Parse(browser)
		if err != nil {
			t.Fatalf("Location %q does not parse: %v", loc, err)
		}
		if to := base.ResolveReference(u); to.Host != base.Host || to.Scheme != base.Scheme {
			t.Fatalf("next=%q sends the browser to %q (%s), off the dashboard", next, loc, to)
		}
		if loc != "/" && loc != next && !strings.HasPrefix(next, "/") {
			t.Fatalf("next=%q redirects to %q, neither next nor /", next, loc)
		}
	})
}

// FuzzWebhookLimit sends fuzzed deliveries through the dashboard's webhook
// route to the real notify.Intake.Webhook, with a 1 KiB limit: whatever the
// body, its declared length and its headers, no more than the limit (and
// the byte that shows it is over) is read, a declared length over it is
// refused with 413 before a byte is read, a body over it with 413, and a
// body within it never with 413; an unsigned delivery is not read at all.
func FuzzWebhookLimit(f *testing.F) {
	const ghToken = "fuzz-webhook-gh-token"
	hub := githubtest.New(f, ghToken)
	in, err := notify.NewIntake(notify.IntakeOptions{GitHubOptions: notify.GitHubOptions{Repo: "pg/bot", APIURL: hub.URL(), Token: ghToken, Labels: []string{"pgbisect"}}})
	if err != nil {
		f.Fatal(err)
	}
	secret := []byte("fuzz-webhook-secret")
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, err := in.Webhook(r.Context(), r, secret)
		switch {
		case errors.Is(err, notify.ErrBadSignature):
			http.Error(w, "bad signature", http.StatusUnauthorized)
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	const limit = 1 << 10
	srv, err := New(nil, Config{Webhook: hook, WebhookMaxBody: limit})
	if err != nil {
		f.Fatal(err)
	}
	paths, _ := filepath.Glob("../../../notify/testdata/webhook/*.json")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "issue_comment", "application/json", int64(-1), true, true)
		f.Add(data, "ping", "application/x-www-form-urlencoded", int64(len(data)), true, false)
	}
	f.Add(bytes.Repeat([]byte("x"), 2*limit), "issue_comment", "application/json", int64(-1), true, true)
	f.Add([]byte("{}"), "issue_comment", "application/json", int64(1<<40), true, true)
	f.Add([]byte("{}"), "issue_comment", "text/plain", int64(0), false, false)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body []byte, event, ctype string, declared int64, signed, good bool) {
		read := &countingReader{r: bytes.NewReader(body)}
		r := httptest.NewRequestWithContext(ctx, "POST", "/github/webhook", nil)
		r.Body = io.NopCloser(read)
		// The declared length is what the client says: at most the body's
		// own length (net/http reads no further), or unknown (-1).
		r.ContentLength = -1
		if declared >= 0 {
			r.ContentLength = declared
			if declared <= int64(len(body)) {
				read.r = bytes.NewReader(body[:declared])
			}
		}
		r.Header.Set("Content-Type", ctype)
		r.Header.Set("X-GitHub-Event", event)
		r.Header.Set("X-GitHub-Delivery", "fuzz-1")
		if signed {
			key := secret
			if !good {
				key = []byte("not-the-secret")
			}
			mac := hmac.New(sha256.New, key)
			mac.Write(body)
			r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		}
		w := httptest.NewRecorder()
		fuzztest.Within(t, func() { srv.ServeHTTP(w, r) })
		sent := int64(len(body))
		if r.ContentLength >= 0 && r.ContentLength < sent {
			sent = r.ContentLength
		}
		switch {
		case read.n > limit+1:
			t.Fatalf("%d bytes read of a %d-byte body, over the %d-byte limit", read.n, sent, limit)
		case r.ContentLength > limit && (w.Code != http.StatusRequestEntityTooLarge || read.n != 0):
			t.Fatalf("a declared length of %d: %d after reading %d bytes, want 413 unread", r.ContentLength, w.Code, read.n)
		case w.Code == http.StatusRequestEntityTooLarge && sent <= limit && r.ContentLength <= limit:
			t.Fatalf("a %d-byte body refused as too large", sent)
		case sent > limit && read.n > limit && w.Code != http.StatusRequestEntityTooLarge:
			t.Fatalf("a %d-byte body read past the limit answered %d, want 413", sent, w.Code)
		case !signed && read.n != 0:
			t.Fatalf("an unsigned delivery: %d bytes read", read.n)
		}
	})
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// streamStore is a store of one event stream, named "known", whose events
// carry text.
type streamStore struct {
	Store
	text string
}

func (s streamStore) LastEvents(_ context.Context, job string, _ int) ([]store.Event, error) {
	if job != "known" {
		return nil, nil
	}
	return []store.Event{{JobID: job, Seq: 2, Kind: "done"}}, nil
}

func (s streamStore) LoadBisection(_ context.Context, id string) (*bisect.State, error) {
	return nil, bisect.ErrNotFound
}

func (s streamStore) FollowEvents(_ context.Context, job string, after int64, fn func(store.Event) error) error {
	payload, _ := json.Marshal(map[string]string{"message": s.text})
	for _, e := range []store.Event{{JobID: job, Seq: 1, Kind: s.text, Payload: payload}, {JobID: job, Seq: 2, Kind: "done"}} {
		if e.Seq <= after {
			continue
		}
		if err := fn(e); err != nil {
			if errors.Is(err, store.ErrStopFollowing) {
				return nil
			}
			return err
		}
	}
	return nil
}

// FuzzEventsPath opens an event stream at a fuzzed path, Last-Event-ID and
// ?after, on a store of one stream whose events hold fuzzed text: every
// answer is an error, a 204, or a stream of well-formed lines (comments,
// id: with a number, data: with JSON) with one id per event, never a field
// the request or the event put there; an unknown stream is a 404.
func FuzzEventsPath(f *testing.F) {
	for _, s := range []struct{ path, last, after, text string }{
		{"known", "", "", "building"}, {"known", "1", "", "a\nid: 99"}, {"known\nid: 7", "", "0", "x"}, {"does-not-exist", "", "", ""},
		{"known%0Adata: x", "", "", "\r\n\r\ndata: y"}, {"known", "", "-1", ""}, {"known", "2", "", ""}, {"..", "", "", ""}, {"job-\r", "", "", "\u2028"},
	} {
		f.Add(s.path, s.last, s.after, s.text)
	}
	f.Fuzz(func(t *testing.T, path, last, after, text string) {
		srv, err := New(streamStore{text: text}, Config{})
		if err != nil {
			t.Fatal(err)
		}
		u := &url.URL{Path: "/events/" + path, RawQuery: url.Values{"after": {after}}.Encode()}
		if after == "" {
			u.RawQuery = ""
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.URL, r.RequestURI = u, u.RequestURI()
		if last != "" && !strings.ContainsAny(last, "\r\n\x00") {
			r.Header.Set("Last-Event-ID", last)
		}
		w := httptest.NewRecorder()
		fuzztest.Within(t, func() { srv.ServeHTTP(w, r) })
		job := r.PathValue("job")
		if w.Code != http.StatusOK {
			if w.Code < 300 && job != "known" {
				t.Fatalf("GET %s: %d for the unknown stream %q, want 404", u, w.Code, job)
			}
			return
		}
		if job != "known" {
			t.Fatalf("GET %s: 200 for the unknown stream %q, want 404", u, job)
		}
		if w.Header().Get("Content-Type") != "text/event-stream" {
			t.Fatalf("Content-Type %q", w.Header().Get("Content-Type"))
		}
		body := w.Body.String()
		if strings.Contains(body, "\r") {
			t.Fatalf("a CR in the stream: %q", body)
		}
		ids := 0
		for _, line := range strings.Split(body, "\n") {
			switch {
			case line == "" || strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				if _, err := strconv.ParseInt(line[4:], 10, 64); err != nil {
					t.Fatalf("id line %q in %q", line, body)
				}
				ids++
			case strings.HasPrefix(line, "data: "):
				if !json.Valid([]byte(line[6:])) {
					t.Fatalf("data line %q is not JSON, in %q", line, body)
				}
			default:
				t.Fatalf("line %q of the stream is no field the server writes: %q", line, body)
			}
		}
		if n := strings.Count(body, "\ndata: ") + strings.Count(body[:min(len(body), 6)], "data: "); n != ids {
			t.Fatalf("%d ids for %d events: %q", ids, n, body)
		}
	})
}
