package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/store/storetest"
)

// noRedirect is a client that shows redirects instead of following them.
func noRedirect(ts *httptest.Server) *http.Client {
	c := *ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func do(t *testing.T, c *http.Client, method, u, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == "POST" && !strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestLogin signs in with the token: a wrong one sets nothing; the right
// one sets the two session cookies and returns only to a local page.
func TestLogin(t *testing.T) {
	st := storetest.Store(t)
	const token = "login-token-0123456789"
	srv, err := New(st, Config{Token: token, Enqueue: EnqueueFunc(func(context.Context, Request) (int64, error) { return 0, nil })})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := noRedirect(ts)

	resp, body := do(t, c, "POST", ts.URL+"/login", url.Values{"token": {"wrong"}, "next": {"/request"}}.Encode(), nil)
	if resp.StatusCode != 401 || len(resp.Cookies()) != 0 || !strings.Contains(body, "not the dashboard&#39;s token") {
		t.Errorf("a wrong token: %d, cookies %v\n%s", resp.StatusCode, resp.Cookies(), body)
	}
	resp, _ = do(t, c, "POST", ts.URL+"/login", url.Values{"token": {token}}.Encode(), map[string]string{"Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != 403 || len(resp.Cookies()) != 0 {
		t.Errorf("a cross-site sign-in: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	for next, want := range map[string]string{"/request": "/request", "//evil.example/x": "/", "https://evil.example/": "/", "/\\evil": "/"} {
		resp, _ = do(t, c, "POST", ts.URL+"/login", url.Values{"token": {token}, "next": {next}}.Encode(), nil)
		if resp.StatusCode != 303 || resp.Header.Get("Location") != want {
			t.Errorf("signing in with next=%q: %d to %q, want 303 to %q", next, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	same := map[string]http.SameSite{}
	for _, ck := range resp.Cookies() {
		if !ck.HttpOnly || strings.Contains(ck.Value, token) || ck.Expires.Before(time.Now().Add(23*time.Hour)) || ck.Expires.After(time.Now().Add(25*time.Hour)) {
			t.Errorf("cookie %s: %+v", ck.Name, ck)
		}
		same[ck.Name] = ck.SameSite
	}
	if same[readCookie] != http.SameSiteLaxMode || same[writeCookie] != http.SameSiteStrictMode {
		t.Errorf("cookies' SameSite: %v, want %s Lax and %s Strict", same, readCookie, writeCookie)
	}
	resp, _ = do(t, c, "POST", ts.URL+"/logout", "", nil)
	if resp.StatusCode != 303 || len(resp.Cookies()) != 2 || resp.Cookies()[0].MaxAge >= 0 {
		t.Errorf("signing out: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
}

// TestPrivate: a private dashboard refuses every page, the API, the event
// streams and /metrics without the token, and serves them with it (bearer
// or session); the sign-in page and its assets stay open.
func TestPrivate(t *testing.T) {
	st := storetest.Store(t)
	if _, err := New(st, Config{Private: true}); err == nil || !strings.Contains(err.Error(), "PGBISECT_WEB_TOKEN") {
		t.Errorf("a private dashboard without a token: %v", err)
	}
	const token = "private-token-0123456789"
	srv, err := New(st, Config{Token: token, Private: true})
	if err != nil {
		t.Fatal(err)
	}
	// This test sends dozens of wrong tokens from one address on purpose;
	// the limit on guesses is TestGuessesLimited's.
	srv.guesses = newBuckets(1000, time.Millisecond)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := noRedirect(ts)
	f := seed(t, st, "private")
	otherSrv, err := New(st, Config{Token: "another-token", Private: true})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]map[string]string{
		"none":          nil,
		"wrong bearer":  {"Authorization": "Bearer nope"},
		"expired":       {"Cookie": readCookie + "=" + srv.sessionValue("read", time.Now().Add(-time.Minute))},
		"forged":        {"Cookie": readCookie + "=9999999999.00"},
		"other token":   {"Cookie": readCookie + "=" + otherSrv.sessionValue("read", time.Now().Add(time.Hour))},
		"write as read": {"Cookie": readCookie + "=" + srv.sessionValue("write", time.Now().Add(time.Hour))},
	}
	allowed := map[string]map[string]string{
		"bearer":        {"Authorization": "Bearer " + token},
		"read session":  {"Cookie": readCookie + "=" + srv.sessionValue("read", time.Now().Add(time.Hour))},
		"write session": {"Cookie": writeCookie + "=" + srv.sessionValue("write", time.Now().Add(time.Hour))},
	}
	for _, path := range []string{"/", "/series", seriesPath(f), "/api/series?" + seriesPath(f)[len("/series?"):], "/bisections/" + f.BisectionID,
		"/api/bisections/" + f.BisectionID, "/findings/" + f.FindingID, "/findings/" + f.FindingID + "/plots/series.png",
		"/commits/" + f.Nights[0].Commit, "/nights/" + itoa(f.Nights[0].ID), "/metrics", "/events/" + f.BisectionID + "?after=999999", "/nope"} {
		for name, h := range refused {
			resp, body := do(t, c, "GET", ts.URL+path, "", h)
			leaks := false
			for _, w := range []string{"Make COPY slower", "Test CPU", f.Nights[3].Commit, "pgbisect_samples", `"state"`, "PNG"} {
				leaks = leaks || strings.Contains(body, w)
			}
			if resp.StatusCode != 401 || leaks {
				t.Errorf("GET %s (%s): %d\n%.300s", path, name, resp.StatusCode, body)
			}
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") && !strings.Contains(body, `name="token"`) {
				t.Errorf("GET %s (%s): the page has no sign-in form\n%.300s", path, name, body)
			}
		}
		for name, h := range allowed {
			if path == "/events/"+f.BisectionID+"?after=999999" {
				continue // a stream that stays open; its headers are checked below
			}
			resp, body := do(t, c, "GET", ts.URL+path, "", h)
			want := 200
			if path == "/nope" {
				want = 404
			}
			if resp.StatusCode != want {
				t.Errorf("GET %s (%s): %d, want %d\n%.300s", path, name, resp.StatusCode, want, body)
			}
		}
	}
	// An event stream opens with the token.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/events/"+f.BisectionID, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("the event stream with the token: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	cancel()
	resp.Body.Close()
	for _, path := range []string{"/login", "/static/style.css", "/favicon.ico"} {
		if resp, body := do(t, c, "GET", ts.URL+path, "", nil); resp.StatusCode != 200 {
			t.Errorf("GET %s without the token: %d\n%.300s", path, resp.StatusCode, body)
		}
	}
	// A private page's sign-in form returns to it.
	if _, body := do(t, c, "GET", ts.URL+"/findings/"+f.FindingID, "", nil); !strings.Contains(body, `name="next" value="/findings/`+f.FindingID+`"`) {
		t.Errorf("the sign-in form does not return to the finding:\n%s", body)
	}
}

// TestRequestForm posts the request form as a signed-in browser: an
// invalid request shows the form again with the error and queues nothing;
// a valid one is queued and the overview says so.
func TestRequestForm(t *testing.T) {
	st := storetest.Store(t)
	const token = "form-token-0123456789"
	const class = "web-form"
	queue := newTestQueue(t, st, class)
	enqueue := queue.enqueue(func(r Request) error {
		if r.Scenario == "copy-singel" {
			return fmt.Errorf("%w: %w", ErrInvalid, &FieldError{"scenario", `unknown scenario "copy-singel" (did you mean copy-single?)`})
		}
		return nil
	})
	srv, err := New(st, Config{Token: token, Enqueue: EnqueueFunc(enqueue), Jobs: queue.q, Scenarios: []string{"copy-single", "select-only"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := noRedirect(ts)
	open := queue.jobs
	session := map[string]string{"Cookie": writeCookie + "=" + srv.sessionValue("write", time.Now().Add(time.Hour))}

	if resp, body := do(t, c, "GET", ts.URL+"/request", "", nil); resp.StatusCode != 401 || !strings.Contains(body, `name="token"`) {
		t.Errorf("the form without a session: %d\n%s", resp.StatusCode, body)
	}
	if resp, body := do(t, c, "GET", ts.URL+"/request", "", session); resp.StatusCode != 200 ||
		!strings.Contains(body, `id="compare-form"`) || !strings.Contains(body, `<option value="select-only">`) {
		t.Errorf("the form: %d\n%s", resp.StatusCode, body)
	}
	form := url.Values{"kind": {"compare"}, "scenario": {"copy-single"}, "a": {"REL_16_0"}, "b": {"REL_17_0"}, "min_effect": {"5%"}}
	bad := url.Values{"kind": {"compare"}, "scenario": {"copy-single"}, "a": {"REL_16_0"}, "b": {""}, "min_effect": {"5%"}}
	for name, tc := range map[string]struct {
		body   string
		header map[string]string
		code   int
		want   string
	}{
		"no session": {form.Encode(), nil, 401, `name="token"`},
		"cross-site": {form.Encode(), map[string]string{"Cookie": session["Cookie"], "Sec-Fetch-Site": "cross-site"}, 403, ""},
		"missing b":  {bad.Encode(), session, 400, `field &#34;b&#34;: required for a compare request`},
		"unknown scenario": {url.Values{"kind": {"compare"}, "scenario": {"copy-singel"}, "a": {"x"}, "b": {"y"}}.Encode(), session, 400,
			`value="copy-singel" class="bad"`},
		"not a number": {url.Values{"kind": {"bisect"}, "scenario": {"s"}, "good": {"a"}, "bad": {"b"}, "min_effect": {"lots"}}.Encode(), session, 400,
			`field &#34;min_effect&#34;: &#34;lots&#34; is not a number`},
	} {
		resp, body := do(t, c, "POST", ts.URL+"/request", tc.body, tc.header)
		if resp.StatusCode != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d, want %d with %q\n%s", name, resp.StatusCode, tc.code, tc.want, body)
		}
		if n := len(open()); n != 0 {
			t.Fatalf("%s: a refused form queued %d jobs", name, n)
		}
		if name == "missing b" && !strings.Contains(body, `value="REL_16_0"`) {
			t.Errorf("the form lost what was typed:\n%s", body)
		}
	}
	resp, body := do(t, c, "POST", ts.URL+"/request", form.Encode(), session)
	js := open()
	if resp.StatusCode != 303 || len(js) != 1 || js[0].Kind != "compare" || !strings.Contains(string(js[0].Args), `"min_effect": 0.05`) {
		t.Fatalf("a valid form: %d %s, queued %+v", resp.StatusCode, body, js)
	}
	if loc := resp.Header.Get("Location"); loc != "/?queued="+itoa(js[0].ID)+"#queue" {
		t.Errorf("after queueing: to %q", loc)
	}
	if _, body := do(t, c, "GET", ts.URL+"/?queued="+itoa(js[0].ID), "", nil); !strings.Contains(body, "Queued job "+itoa(js[0].ID)) {
		t.Errorf("the overview does not say the job was queued:\n%s", body)
	}
	if _, err := queue.q.Cancel(context.Background(), js[0].ID); err != nil {
		t.Fatal(err)
	}
}
