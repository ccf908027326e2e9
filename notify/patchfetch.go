package notify

// Patches named in a GitHub comment (issue 16, item 4): "compare SCENARIO
// BASE --patch URL" fetches an attachment from an allowlisted host, "--pr
// N" the diff of a pull request of the repository. Both are capped in size
// and carried in the queued request, so the machine that runs the job
// needs no access to GitHub.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// DefaultPatchHosts are where a patch may be fetched from by default:
// GitHub's attachments (github.com/user-attachments redirects to
// objects.githubusercontent.com) and raw files and gists.
var DefaultPatchHosts = []string{"github.com/user-attachments", "*.githubusercontent.com"}

// DefaultMaxPatch caps a fetched patch (1 MiB).
const DefaultMaxPatch = 1 << 20

// ErrPatchRefused marks a patch the bot will not fetch or take: a host not
// on the allowlist, a patch over the cap. Its message is the reply.
var ErrPatchRefused = errors.New("patch refused")

// PatchFetcher fetches patches named by URL from allowlisted hosts.
type PatchFetcher struct {
	// Allow lists where patches may come from: "host" or "host/path"
	// (a path prefix), "*.domain" for its subdomains. https only, unless
	// an entry names the scheme ("http://127.0.0.1:8080", for tests).
	// Empty: DefaultPatchHosts.
	Allow []string
	// MaxBytes caps a patch; default DefaultMaxPatch.
	MaxBytes int64
	// Client fetches (no GitHub token is sent: attachments are public);
	// default a client with a one-minute timeout.
	Client *http.Client
}

func (f *PatchFetcher) max() int64 {
	if f.MaxBytes > 0 {
		return f.MaxBytes
	}
	return DefaultMaxPatch
}

func (f *PatchFetcher) allow() []string {
	if len(f.Allow) > 0 {
		return f.Allow
	}
	return DefaultPatchHosts
}

// Allowed says whether u may be fetched: its scheme, host and path match
// an allowlist entry.
func (f *PatchFetcher) Allowed(u *url.URL) bool {
	for _, a := range f.allow() {
		scheme := "https"
		if s, rest, ok := strings.Cut(a, "://"); ok {
			scheme, a = s, rest
		}
		host, path, _ := strings.Cut(a, "/")
		if u.Scheme != scheme || u.User != nil {
			continue
		}
		h := strings.ToLower(u.Host)
		if suffix, ok := strings.CutPrefix(host, "*."); ok {
			if !strings.HasSuffix(h, "."+strings.ToLower(suffix)) {
				continue
			}
		} else if h != strings.ToLower(host) {
			continue
		}
		if path == "" || u.Path == "/"+path || strings.HasPrefix(u.Path, "/"+strings.TrimSuffix(path, "/")+"/") {
			return true
		}
	}
	return false
}

// Fetch gets the patch at raw. Every redirect is checked against the
// allowlist too, and a patch over the cap is refused without reading it
// all. Refusals match ErrPatchRefused.
func (f *PatchFetcher) Fetch(ctx context.Context, raw string) ([]byte, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: %q is not a URL: give the link of a patch attached to the issue", ErrPatchRefused, raw)
	}
	if !f.Allowed(u) {
		return nil, fmt.Errorf("%w: %s is not a host patches are fetched from (allowed: %s): attach the patch to the issue, or use --pr N",
			ErrPatchRefused, u.Host, strings.Join(f.allow(), ", "))
	}
	c := http.Client{Timeout: time.Minute}
	if f.Client != nil {
		c = *f.Client
	}
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return fmt.Errorf("%w: %s redirects more than 5 times", ErrPatchRefused, raw)
		}
		if !f.Allowed(r.URL) {
			return fmt.Errorf("%w: %s redirects to %s, not a host patches are fetched from", ErrPatchRefused, raw, r.URL.Host)
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "pgbisect")
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.Is(err, ErrPatchRefused) && errors.As(err, &ue) {
			return nil, ue.Err // the refusal, without Go's "Get URL:" prefix
		}
		return nil, fmt.Errorf("fetching the patch %s: %w", raw, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the patch %s: %s", raw, resp.Status)
	}
	return readCapped(resp.Body, resp.ContentLength, f.max(), raw)
}

// readCapped reads at most max bytes of a patch and refuses a larger one.
func readCapped(r io.Reader, length, max int64, what string) ([]byte, error) {
	if length > max {
		return nil, fmt.Errorf("%w: %s is %d KiB, more than the %d KiB a patch may be", ErrPatchRefused, what, length>>10, max>>10)
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading the patch %s: %w", what, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: %s is more than the %d KiB a patch may be", ErrPatchRefused, what, max>>10)
	}
	return data, nil
}

// PullDiff returns the diff of pull request number of the repository (go-
// github's PullRequests.GetRaw), refused over max bytes.
func (in *Intake) PullDiff(ctx context.Context, number int, max int64) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxPatch
	}
	diff, _, err := in.client.PullRequests.GetRaw(ctx, in.owner, in.repo, number, github.RawOptions{Type: github.Diff})
	if err != nil {
		if NotFound(err) {
			return nil, fmt.Errorf("%w: %s has no pull request #%d", ErrPatchRefused, in.Repo(), number)
		}
		return nil, fmt.Errorf("fetching the diff of pull request #%d: %w", number, err)
	}
	return readCapped(strings.NewReader(diff), int64(len(diff)), max, fmt.Sprintf("the diff of pull request #%d", number))
}
