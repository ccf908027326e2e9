package notify

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/notify/githubtest"
)

// fakeGitHub is the fake GitHub of package githubtest as the poster's tests
// use it: every issue and comment the poster makes must start with the
// finding marker.
type fakeGitHub struct {
	*githubtest.Hub
	labels []string
}

const testToken = "ghp_testTOKENnever_to_be_seen"

func newFakeGitHub(t *testing.T) *fakeGitHub {
	h := githubtest.New(t, testToken)
	h.CheckBody = func(body string) {
		if !strings.HasPrefix(body, "<!-- pgbisect finding=") {
			t.Errorf("body does not start with the pgbisect marker: %.80q", body)
		}
	}
	return &fakeGitHub{Hub: h, labels: h.Labels}
}

// poster returns a Poster for the fake with a fake clock that starts at a
// fixed instant in the past and advances only when the poster sleeps.
func (g *fakeGitHub) poster(t *testing.T) (*Poster, *[]time.Duration) {
	p, err := NewPoster(GitHubOptions{Repo: "pg/bot", APIURL: g.URL(), Labels: g.labels, Token: testToken,
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
// relative to the repository's issues, "" for the collection).
func (g *fakeGitHub) failNext(method, path string, f func(http.ResponseWriter)) {
	g.FailNext(method, "issues"+path, f)
}

func (g *fakeGitHub) takeCalls() []string { return g.TakeCalls() }

func (g *fakeGitHub) addIssue(title, body string, labels []string, state string, pr bool) int {
	return g.AddIssue(title, body, labels, state, pr)
}

func (g *fakeGitHub) issues() []githubtest.Issue { return g.Issues() }

func (g *fakeGitHub) issue(n int) githubtest.Issue { return g.Issues()[n-1] }

func (g *fakeGitHub) bodySeen() []string {
	g.Lock()
	defer g.Unlock()
	return append([]string(nil), g.BodiesSeen...)
}

const basePath = githubtest.RepoPath + "issues"

var (
	rateLimited          = githubtest.RateLimited
	secondaryRateLimited = githubtest.SecondaryRateLimited
	status               = githubtest.Status
	unprocessable        = githubtest.Unprocessable
)
