package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

const (
	listIssues  = "GET " + basePath
	createIssue = "POST " + basePath
	title9f     = "[master] 9f8377f7a2: copy-single elapsed +10.1% regression (lower is better)"
	titleFaff   = "[master] faff8f8e47: copy-single elapsed +7.5% regression (lower is better)"
)

// memOutbox is an Outbox in memory; the results store's own (store.Store)
// is tested against a real PostgreSQL in package store.
type memOutbox struct {
	ids   []string
	all   map[string]*finding.Outgoing
	saved bytes.Buffer // every post recorded, as JSON, to look for secrets
}

func (m *memOutbox) Pending(ctx context.Context) ([]finding.Outgoing, error) {
	var out []finding.Outgoing
	for _, id := range m.ids {
		if o := m.all[id]; len(finding.Unposted(o.Finding, o.Posts)) > 0 {
			out = append(out, finding.Outgoing{Finding: o.Finding, Posts: slices.Clone(o.Posts)})
		}
	}
	return out, nil
}

func (m *memOutbox) MarkPosted(ctx context.Context, id string, p finding.Post) error {
	o := m.all[id]
	if o == nil {
		return fmt.Errorf("finding %s: %w", id, finding.ErrNotFound)
	}
	o.Posts = append(o.Posts, p)
	return json.NewEncoder(&m.saved).Encode(p)
}

func outboxWith(t *testing.T, fs ...*finding.Finding) *memOutbox {
	t.Helper()
	m := &memOutbox{all: map[string]*finding.Outgoing{}}
	for _, f := range fs {
		if err := f.Validate(); err != nil {
			t.Fatal(err)
		}
		m.ids = append(m.ids, f.ID)
		m.all[f.ID] = &finding.Outgoing{Finding: f}
	}
	return m
}

func deliver(t *testing.T, p *Poster, out Outbox) Delivery {
	t.Helper()
	d, err := p.Deliver(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func pending(t *testing.T, out Outbox) []string {
	t.Helper()
	ps, err := out.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.Finding.ID)
	}
	return ids
}

// TestPostCreatesIssues posts a two-culprit regression to a repository with
// no open issue: one issue per culprit, both recorded, and a second run
// posts nothing.
func TestPostCreatesIssues(t *testing.T) {
	g := newFakeGitHub(t)
	var logs bytes.Buffer
	p, sleeps := g.poster(t)
	p.Log = slog.New(slog.NewTextHandler(&logs, nil))
	f := twoCulprits()
	f.Plots = []string{"bisection.png", "bisection.svg"} // as WriteReport leaves them
	out := outboxWith(t, f)

	d := deliver(t, p, out)
	if len(d.Failed) > 0 {
		t.Fatalf("failed: %v", d.Failed)
	}
	want := []string{listIssues, createIssue, listIssues, createIssue}
	if got := g.takeCalls(); !slices.Equal(got, want) {
		t.Errorf("calls = %q, want %q", got, want)
	}
	if len(*sleeps) != 0 {
		t.Errorf("slept %v without any failure", *sleeps)
	}
	if len(g.issues()) != 2 || g.issue(1).Title != title9f || g.issue(2).Title != titleFaff {
		t.Fatalf("issues = %+v", g.issues())
	}
	body := g.issue(1).Body
	for _, want := range []string{
		"<!-- pgbisect finding=20260130T020000Z-copy-single-c24e9ef330 key=[master] 9f8377f7a2: -->",
		"**Regression:** 2 commits regressed copy-single",
		"![bisection](https://pgbisect.example.org/reports/20260130T020000Z-copy-single-c24e9ef330/bisection.png)",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("issue body lacks %q", want)
		}
	}
	if got := d.Posts; len(got) != 2 || got[0].Action != finding.ActionCreated || got[0].Issue != 1 || got[1].Issue != 2 ||
		got[0].URL != "https://github.example/pg/bot/issues/1" || got[0].Repo != "pg/bot" {
		t.Errorf("posts = %+v", got)
	}
	if ids := pending(t, out); len(ids) != 0 {
		t.Errorf("still pending: %v", ids)
	}

	deliver(t, p, out)
	if calls := g.takeCalls(); len(calls) != 0 {
		t.Errorf("a second run made requests: %q", calls)
	}

	// The token never appears in what is logged, recorded or posted.
	for what, s := range map[string]string{"log": logs.String(), "outbox": out.saved.String(), "bodies": strings.Join(g.bodySeen(), "\n")} {
		if strings.Contains(s, testToken) {
			t.Errorf("the token appears in the %s", what)
		}
	}
}

// TestPostCommentsOnExistingIssue checks a culprit with an open issue gets
// a comment, that closed issues, pull requests and look-alike titles are not
// taken for it, and that an improvement about that culprit is a comment too.
func TestPostCommentsOnExistingIssue(t *testing.T) {
	g := newFakeGitHub(t)
	p, _ := g.poster(t)
	g.addIssue(title9f, "opened by hand", []string{"pgbisect"}, "open", false)                                            // #1: the one
	g.addIssue("[master] faff8f8e47: copy-single elapsed +7.5% regression", "old", []string{"pgbisect"}, "closed", false) // #2: closed
	g.addIssue("[master] faff8f8e47: a pull request", "", []string{"pgbisect"}, "open", true)                             // #3: a PR
	g.addIssue("[master] faff8f8e47x: look-alike", "", []string{"pgbisect"}, "open", false)                               // #4
	g.addIssue("[master] faff8f8e47: no bot label", "", []string{"performance"}, "open", false)                           // #5

	out := outboxWith(t, twoCulprits())
	if d := deliver(t, p, out); len(d.Failed) > 0 {
		t.Fatal(d.Failed)
	}
	want := []string{listIssues, "GET " + basePath + "/1/comments", "POST " + basePath + "/1/comments", listIssues, createIssue}
	if got := g.takeCalls(); !slices.Equal(got, want) {
		t.Errorf("calls = %q, want %q", got, want)
	}
	if c := g.issue(1).Comments; len(c) != 1 || !strings.Contains(c[0].Body, "Add a DEFAULT option to COPY FROM") {
		t.Errorf("comments on #1 = %+v", c)
	}
	if len(g.issues()) != 6 || g.issue(6).Title != titleFaff {
		t.Errorf("want a new issue #6 for faff8f8e47, have %d issues", len(g.issues()))
	}

	// The fix: an improvement following up 9f8377f7a2 comments on #1; an
	// improvement with no issue to follow up is recorded as skipped.
	orphan := improvement()
	orphan.ID, orphan.FollowUp = "20260204T020000Z-copy-single-orphan", nil
	out2 := outboxWith(t, improvement(), orphan, noRegression())
	d := deliver(t, p, out2)
	if len(d.Failed) > 0 {
		t.Fatal(d.Failed)
	}
	if c := g.issue(1).Comments; len(c) != 2 || !strings.Contains(c[1].Body, "**Improvement:**") {
		t.Errorf("the improvement did not comment on #1: %+v", c)
	}
	if len(d.Posts) != 2 || d.Posts[0].Action != finding.ActionCommented || d.Posts[1].Action != finding.ActionSkipped {
		t.Errorf("posts = %+v", d.Posts)
	}
	if len(g.issues()) != 6 {
		t.Errorf("an improvement opened an issue")
	}
	if ids := pending(t, out2); len(ids) != 0 {
		t.Errorf("still pending: %v", ids)
	}
}

// TestPostRetries plays transient failures on the create request and checks
// the poster waits as GitHub says and posts exactly once.
func TestPostRetries(t *testing.T) {
	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC) // the fake clock's start
	for _, tc := range []struct {
		name   string
		fails  []func(w http.ResponseWriter)
		sleeps []time.Duration
	}{
		{"rate limit waits for the reset", []func(http.ResponseWriter){rateLimited(start.Add(42 * time.Second))}, []time.Duration{43 * time.Second}},
		{"secondary rate limit waits Retry-After", []func(http.ResponseWriter){secondaryRateLimited(30)}, []time.Duration{30 * time.Second}},
		{"500 backs off", []func(http.ResponseWriter){status(500, "Internal Server Error")}, []time.Duration{2 * time.Second}},
		{"502 twice backs off twice", []func(http.ResponseWriter){status(502, "Bad Gateway"), status(502, "Bad Gateway")}, []time.Duration{2 * time.Second, 4 * time.Second}},
		{"429 waits Retry-After", []func(http.ResponseWriter){func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			status(429, "Too Many Requests")(w)
		}}, []time.Duration{7 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newFakeGitHub(t)
			p, sleeps := g.poster(t)
			for _, f := range tc.fails {
				g.failNext("POST", "", f)
			}
			f := twoCulprits()
			f.Culprits = f.Culprits[:1]
			out := outboxWith(t, f)
			if d := deliver(t, p, out); len(d.Failed) > 0 {
				t.Fatal(d.Failed)
			}
			if !slices.Equal(*sleeps, tc.sleeps) {
				t.Errorf("slept %v, want %v", *sleeps, tc.sleeps)
			}
			posts := 0
			for _, c := range g.takeCalls() {
				if c == createIssue {
					posts++
				}
			}
			if posts != len(tc.fails)+1 || len(g.issues()) != 1 {
				t.Errorf("%d create requests and %d issues, want %d and 1", posts, len(g.issues()), len(tc.fails)+1)
			}
			if ids := pending(t, out); len(ids) != 0 {
				t.Errorf("still pending: %v", ids)
			}
		})
	}
}

// TestPostPermanentFailureStaysPending checks that a failure retrying cannot
// fix (422, a 403 that is not a rate limit, a rate limit resetting too far
// ahead) is not retried, leaves the finding pending, and that a later run
// posts it exactly once.
func TestPostPermanentFailureStaysPending(t *testing.T) {
	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		fail    func(http.ResponseWriter)
		wantErr string
	}{
		{"422", unprocessable, "422 Validation Failed"},
		{"403", status(403, "Resource not accessible by integration"), "403 Resource not accessible"},
		{"rate limit for hours", rateLimited(start.Add(2 * time.Hour)), "more than the 15m0s allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newFakeGitHub(t)
			p, sleeps := g.poster(t)
			g.failNext("POST", "", tc.fail)
			f := twoCulprits()
			f.Culprits = f.Culprits[:1]
			out := outboxWith(t, f)

			d := deliver(t, p, out)
			if len(d.Failed) != 1 || !strings.Contains(d.Failed[0].Error(), tc.wantErr) || !strings.Contains(d.Failed[0].Error(), "stays pending") {
				t.Fatalf("failed = %v, want one error with %q", d.Failed, tc.wantErr)
			}
			if len(*sleeps) != 0 {
				t.Errorf("slept %v on a failure that waiting does not fix", *sleeps)
			}
			if got := g.takeCalls(); !slices.Equal(got, []string{listIssues, createIssue}) {
				t.Errorf("calls = %q: a permanent failure was retried", got)
			}
			if ids := pending(t, out); !slices.Equal(ids, []string{f.ID}) {
				t.Fatalf("pending = %v, want the finding", ids)
			}

			// Later, GitHub accepts it: posted once, then never again.
			deliver(t, p, out)
			deliver(t, p, out)
			if len(g.issues()) != 1 {
				t.Errorf("%d issues, want 1", len(g.issues()))
			}
			if ids := pending(t, out); len(ids) != 0 {
				t.Errorf("still pending: %v", ids)
			}
		})
	}
}

// failingOutbox fails to record the first post, as a crash between posting
// and recording would.
type failingOutbox struct {
	*memOutbox
	failed bool
}

func (o *failingOutbox) MarkPosted(ctx context.Context, id string, p finding.Post) error {
	if !o.failed {
		o.failed = true
		return errors.New("disk full")
	}
	return o.memOutbox.MarkPosted(ctx, id, p)
}

// TestPostNotRecordedIsNotRepeated checks that a post GitHub accepted but
// that was not recorded is found by its marker on the next run and recorded,
// not posted again — for a new issue and for a comment.
func TestPostNotRecordedIsNotRepeated(t *testing.T) {
	for _, existing := range []bool{false, true} {
		name := "create"
		if existing {
			name = "comment"
		}
		t.Run(name, func(t *testing.T) {
			g := newFakeGitHub(t)
			p, _ := g.poster(t)
			if existing {
				g.addIssue(title9f, "by hand", []string{"pgbisect"}, "open", false)
			}
			f := twoCulprits()
			f.Culprits = f.Culprits[:1]
			out := &failingOutbox{memOutbox: outboxWith(t, f)}
			if d := deliver(t, p, out); len(d.Failed) != 1 || !strings.Contains(d.Failed[0].Error(), "disk full") {
				t.Fatalf("failed = %v", d.Failed)
			}
			g.takeCalls()
			d := deliver(t, p, out)
			if len(d.Failed) > 0 {
				t.Fatal(d.Failed)
			}
			for _, c := range g.takeCalls() {
				if strings.HasPrefix(c, "POST") {
					t.Errorf("posted again: %s", c)
				}
			}
			if len(g.issues()) != 1 || len(g.issue(1).Comments) != map[bool]int{false: 0, true: 1}[existing] {
				t.Errorf("issues = %d, comments on #1 = %d", len(g.issues()), len(g.issue(1).Comments))
			}
			if len(d.Posts) != 1 || !strings.Contains(d.Posts[0].Note, "found on GitHub") {
				t.Errorf("posts = %+v", d.Posts)
			}
			if ids := pending(t, out); len(ids) != 0 {
				t.Errorf("still pending: %v", ids)
			}
		})
	}
}

// TestPlan checks the dry run looks at the open issues, posts nothing, and
// shows the very body Deliver would post.
func TestPlan(t *testing.T) {
	g := newFakeGitHub(t)
	p, _ := g.poster(t)
	g.addIssue(title9f, "by hand", []string{"pgbisect"}, "open", false)
	f := twoCulprits()
	plan, err := p.Plan(context.Background(), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 2 || plan[0].Action != "comment" || plan[0].Issue != 1 || plan[1].Action != "create" ||
		plan[1].Target.Title != titleFaff || !slices.Equal(plan[1].Labels, g.labels) {
		t.Fatalf("plan = %+v", plan)
	}
	for _, c := range g.takeCalls() {
		if !strings.HasPrefix(c, "GET") {
			t.Errorf("the dry run made a request that changes something: %s", c)
		}
	}
	deliver(t, p, outboxWith(t, f))
	if got := g.issue(2).Body; got != plan[1].Body {
		t.Errorf("posted body differs from the planned one")
	}

	// Without a token: no requests at all, and posting says what is missing.
	g.takeCalls()
	p2, err := NewPoster(GitHubOptions{Repo: "pg/bot", APIURL: g.URL(), Labels: g.labels})
	if err != nil {
		t.Fatal(err)
	}
	plan, err = p2.Plan(context.Background(), f, nil)
	if err != nil || len(plan) != 2 || plan[0].Action != "create or comment" {
		t.Fatalf("plan without token = %+v, %v", plan, err)
	}
	if c := g.takeCalls(); len(c) != 0 {
		t.Errorf("a plan without a token made requests: %q", c)
	}
	if _, err := p2.PostFinding(context.Background(), f, nil, func(finding.Post) error { return nil }); err == nil || !strings.Contains(err.Error(), "GITHUB_TOKEN") {
		t.Errorf("posting without a token: %v", err)
	}
}

// TestPostSameCulpritTwiceInOneRun checks that two findings about one
// culprit posted in the same run make one issue and one comment: the open
// issues are listed, not searched, so the issue created a moment ago is
// seen (the search API may not show it yet).
func TestPostSameCulpritTwiceInOneRun(t *testing.T) {
	g := newFakeGitHub(t)
	p, _ := g.poster(t)
	a := twoCulprits()
	a.Culprits = a.Culprits[:1]
	b := twoCulprits()
	b.Culprits = b.Culprits[:1]
	b.ID, b.Scenario = "20260130T030000Z-copy-wide-c24e9ef330", "copy-wide"
	out := outboxWith(t, a, b)
	if d := deliver(t, p, out); len(d.Failed) > 0 {
		t.Fatal(d.Failed)
	}
	if len(g.issues()) != 1 || len(g.issue(1).Comments) != 1 || !strings.Contains(g.issue(1).Comments[0].Body, "regressed copy-wide") {
		t.Errorf("want one issue with one comment about copy-wide; have %d issues", len(g.issues()))
	}
}

// TestUpdateFindingEditsItsPosts: a finding posted (one culprit's issue
// created, the other's an existing issue commented on) and then updated
// (the revert checks that follow a bisection's answer) edits the issue it
// created and the comment it made, with the new report, and posts nothing
// new.
func TestUpdateFindingEditsItsPosts(t *testing.T) {
	g := newFakeGitHub(t)
	p, _ := g.poster(t)
	g.addIssue(title9f, "opened by hand", []string{"pgbisect"}, "open", false) // #1
	f := twoCulprits()
	out := outboxWith(t, f)
	d := deliver(t, p, out)
	if len(d.Failed) > 0 || len(d.Posts) != 2 || d.Posts[0].Action != finding.ActionCommented || d.Posts[1].Action != finding.ActionCreated {
		t.Fatalf("posts %+v, failed %v", d.Posts, d.Failed)
	}
	g.takeCalls()
	f.Reverts = []finding.RevertCheck{{Culprits: []finding.Commit{f.Culprits[0].Commit}, Skipped: "an update after the answer"}}
	edited, err := p.UpdateFinding(context.Background(), f, d.Posts)
	if err != nil || len(edited) != 2 {
		t.Fatalf("edited %+v: %v", edited, err)
	}
	want := []string{"PATCH " + basePath + "/comments/" + fmt.Sprint(d.Posts[0].CommentID), "PATCH " + basePath + "/2"}
	if got := g.takeCalls(); !slices.Equal(got, want) {
		t.Errorf("calls = %q, want %q", got, want)
	}
	if len(g.issues()) != 2 || len(g.issue(1).Comments) != 1 {
		t.Fatalf("an update posted something new: %d issues, %d comments on #1", len(g.issues()), len(g.issue(1).Comments))
	}
	for _, body := range []string{g.issue(1).Comments[0].Body, g.issue(2).Body} {
		if !strings.Contains(body, "an update after the answer") {
			t.Errorf("post not updated: %.300s", body)
		}
	}
	if g.Edits != 1 || g.IssueEdits != 1 {
		t.Errorf("%d comment edits and %d issue edits, want 1 each", g.Edits, g.IssueEdits)
	}
}
