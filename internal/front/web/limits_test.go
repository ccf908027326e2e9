package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestGuessesLimited: wrong tokens, at /login or as a bearer, use up the
// client's allowance; past it the client gets 429 before its token is
// looked at, even the right one. (Today's code before the limit answered
// every guess.)
func TestGuessesLimited(t *testing.T) {
	st := storetest.Store(t)
	const token = "guess-token-0123456789"
	srv, err := New(st, Config{Token: token, Private: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := noRedirect(ts)
	for i := 0; i < guessBurst; i++ {
		if resp, _ := do(t, c, "GET", ts.URL+"/", "", map[string]string{"Authorization": "Bearer wrong"}); resp.StatusCode != 401 {
			t.Fatalf("wrong bearer %d: %d, want 401", i+1, resp.StatusCode)
		}
	}
	resp, _ := do(t, c, "POST", ts.URL+"/login", url.Values{"token": {"wrong"}}.Encode(), nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("guess %d at /login: %d (Retry-After %q), want 429 with Retry-After", guessBurst+1, resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, _ := do(t, c, "GET", ts.URL+"/", "", map[string]string{"Authorization": "Bearer " + token}); resp.StatusCode != 429 {
		t.Errorf("the right token from a client out of guesses: %d, want 429", resp.StatusCode)
	}
}

// TestLogoutRevokes: signing out ends the session on the server, so a copy
// of the cookie taken before no longer works (today's signed cookies stayed
// valid for 14 days after a logout).
func TestLogoutRevokes(t *testing.T) {
	st := storetest.Store(t)
	const token = "logout-token-0123456789"
	srv, err := New(st, Config{Token: token, Private: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := noRedirect(ts)
	resp, _ := do(t, c, "POST", ts.URL+"/login", url.Values{"token": {token}}.Encode(), nil)
	var cookies []string
	for _, ck := range resp.Cookies() {
		cookies = append(cookies, ck.Name+"="+ck.Value)
	}
	header := map[string]string{"Cookie": strings.Join(cookies, "; ")}
	if resp, _ := do(t, c, "GET", ts.URL+"/", "", header); resp.StatusCode != 200 {
		t.Fatalf("signed in: %d, want 200", resp.StatusCode)
	}
	if resp, _ := do(t, c, "POST", ts.URL+"/logout", "", header); resp.StatusCode != 303 {
		t.Fatalf("signing out: %d", resp.StatusCode)
	}
	if resp, _ := do(t, c, "GET", ts.URL+"/", "", header); resp.StatusCode != 401 {
		t.Errorf("the cookie of a signed-out session: %d, want 401", resp.StatusCode)
	}
}

// bodyCounter counts what the server read of a body.
type bodyCounter struct {
	n, size int64
}

func (r *bodyCounter) Read(p []byte) (int, error) {
	if r.n >= r.size {
		return 0, io.EOF
	}
	m := int64(len(p))
	if r.size-r.n < m {
		m = r.size - r.n
	}
	for i := range p[:m] {
		p[i] = 'x'
	}
	r.n += m
	return int(m), nil
}

// TestWebhookBodyLimit: the public webhook route refuses a body over the
// limit with 413, declared or not, without reading it whole (today's code
// read a 300 MB unsigned body into memory before answering 401).
func TestWebhookBodyLimit(t *testing.T) {
	st := storetest.Store(t)
	read := int64(0)
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		read += n
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv, err := New(st, Config{Webhook: hook, WebhookMaxBody: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	for _, declared := range []bool{true, false} {
		read = 0
		body := &bodyCounter{size: 64 << 20}
		req, err := http.NewRequestWithContext(context.Background(), "POST", ts.URL+"/github/webhook", body)
		if err != nil {
			t.Fatal(err)
		}
		if declared {
			req.ContentLength = body.size
		} else {
			req.ContentLength = -1 // chunked: the length is not known up front
		}
		req.Header.Set("X-GitHub-Event", "issue_comment")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		if err == nil && resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a 64 MiB body (declared %v): %d, want 413", declared, resp.StatusCode)
		}
		if read > 2<<20 {
			t.Errorf("a 64 MiB body (declared %v): the handler read %d bytes, want at most the 1 MiB limit", declared, read)
		}
	}
}

// TestEventStreamLimits: a stream of a job that does not exist is a 404
// (today's code streamed it forever), and one client holds at most its
// share of streams: the next is a 429 until one closes.
func TestEventStreamLimits(t *testing.T) {
	st := storetest.Store(t)
	srv, err := New(st, Config{StreamsPerClient: 2, Streams: 10})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	if resp, _ := do(t, ts.Client(), "GET", ts.URL+"/events/does-not-exist", "", nil); resp.StatusCode != 404 {
		t.Errorf("the stream of an unknown job: %d, want 404", resp.StatusCode)
	}
	job := "limits-" + t.Name()
	if _, err := st.AppendEvent(context.Background(), job, "note", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/events/"+job, nil)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var held []*http.Response
	for i := 0; i < 2; i++ {
		resp := open()
		if resp.StatusCode != 200 {
			t.Fatalf("stream %d: %d, want 200", i+1, resp.StatusCode)
		}
		held = append(held, resp)
	}
	resp := open()
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a third stream from one client with a share of 2: %d, want 429", resp.StatusCode)
	}
	for _, r := range held {
		r.Body.Close()
	}
}
