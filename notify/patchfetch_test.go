package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

const testPatch = "diff --git a/a.c b/a.c\n--- a/a.c\n+++ b/a.c\n@@ -1 +1 @@\n-int a;\n+int a, z;\n"

func TestPatchFetcherAllowlist(t *testing.T) {
	f := &PatchFetcher{}
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://github.com/user-attachments/files/123/fix.patch", true},
		{"https://objects.githubusercontent.com/github-production-repository-file/1/fix.patch", true},
		{"https://raw.githubusercontent.com/pg/pg/abc/fix.patch", true},
		{"http://github.com/user-attachments/files/123/fix.patch", false}, // https only
		{"https://github.com/user-attachmentsX/fix.patch", false},
		{"https://github.com/pg/pg/pull/1.diff", false},
		{"https://githubusercontent.com.evil.org/fix.patch", false},
		{"https://evil.org/fix.patch", false},
		{"https://user@objects.githubusercontent.com/fix.patch", false},
	} {
		u, _ := url.Parse(tc.url)
		if got := f.Allowed(u); got != tc.ok {
			t.Errorf("Allowed(%s) = %v, want %v", tc.url, got, tc.ok)
		}
	}
}

// TestPatchFetch: a patch is fetched from an allowed host (a local server
// on the allowlist, as a test must), refused from another, refused when a
// redirect leaves the allowlist, and refused over the cap whether or not
// the server says its length.
func TestPatchFetch(t *testing.T) {
	big := strings.Repeat("+x\n", 1000)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(testPatch)) }))
	defer other.Close()
	fetched := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched++
		switch r.URL.Path {
		case "/files/fix.patch":
			w.Write([]byte(testPatch))
		case "/files/away.patch":
			http.Redirect(w, r, other.URL+"/fix.patch", http.StatusFound)
		case "/files/big.patch":
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			w.Write([]byte(big))
		case "/files/big-chunked.patch":
			w.(http.Flusher).Flush() // no Content-Length
			w.Write([]byte(big))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	f := &PatchFetcher{Allow: []string{srv.URL + "/files"}, MaxBytes: 1024}
	ctx := context.Background()
	data, err := f.Fetch(ctx, srv.URL+"/files/fix.patch")
	if err != nil || string(data) != testPatch {
		t.Fatalf("allowed fetch: %q %v", data, err)
	}
	n := fetched
	for _, tc := range []struct{ url, want string }{
		{other.URL + "/fix.patch", "is not a host patches are fetched from"},
		{srv.URL + "/elsewhere/fix.patch", "is not a host patches are fetched from"},
		{"fix.patch", "is not a URL"},
	} {
		if _, err := f.Fetch(ctx, tc.url); !errors.Is(err, ErrPatchRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.url, err, tc.want)
		}
	}
	if fetched != n {
		t.Errorf("refused URLs were fetched (%d requests)", fetched-n)
	}
	for _, tc := range []struct{ path, want string }{
		{"/files/away.patch", "redirects to 127.0.0.1"},
		{"/files/big.patch", "is 2 KiB, more than the 1 KiB a patch may be"},
		{"/files/big-chunked.patch", "more than the 1 KiB a patch may be"},
	} {
		if _, err := f.Fetch(ctx, srv.URL+tc.path); !errors.Is(err, ErrPatchRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.path, err, tc.want)
		}
	}
}
