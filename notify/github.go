package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// GitHubOptions say where and how findings are posted. The yaml keys are
// those of the github section of pgbisect's config file, which holds a
// GitHubOptions; the token never comes from a file.
type GitHubOptions struct {
	// Repo is owner/name.
	Repo string `yaml:"repo"`
	// APIURL is the API base URL; empty means https://api.github.com/. For
	// GitHub Enterprise it is https://HOST/api/v3/.
	APIURL string `yaml:"api_url"`
	// Labels go on every new issue; the first is the bot's label, by which
	// it finds its own open issues.
	Labels []string `yaml:"labels"`
	// Token authenticates; it comes from GITHUB_TOKEN and is never logged
	// or written into a report. Empty allows only Plan without lookups.
	Token string `yaml:"-"`
	// ReportURL, when set, is where the state directory's reports/ are
	// served; plot images in issue bodies link to ReportURL/<id>/<plot>.
	ReportURL string `yaml:"report_url"`
	// HTTPClient is the HTTP client (nil: a client with a 60 s timeout).
	HTTPClient *http.Client `yaml:"-"`
}

// Retry bounds how long a poster retries one request.
type Retry struct {
	// Attempts is the most tries of one request. Default 6.
	Attempts int
	// Backoff is the first wait after a server error or a network failure;
	// it doubles each time up to MaxBackoff. Default 2 s, 2 min.
	Backoff, MaxBackoff time.Duration
	// MaxWait is the most a poster waits for one request in total,
	// including waits for a rate limit to reset. A longer wait gives up:
	// the finding stays pending and goes out on the next attempt. Default
	// 15 min.
	MaxWait time.Duration
}

// DefaultRetry is the retry policy of NewPoster.
var DefaultRetry = Retry{Attempts: 6, Backoff: 2 * time.Second, MaxBackoff: 2 * time.Minute, MaxWait: 15 * time.Minute}

// Poster posts findings to GitHub issues: one open issue per culprit, found
// by the title prefix of its Target.Key among the open issues carrying the
// bot's label; a new finding about the same culprit becomes a comment.
//
// Its go-github calls are function fields of api, so a test can record
// them; the tests in this package drive the real go-github client against
// an httptest server instead.
type Poster struct {
	owner, repo string
	labels      []string
	reportURL   string
	canLookup   bool
	// newAPI returns the API for one attempt. Each attempt gets a fresh
	// go-github client: a client that saw a rate limit refuses every request
	// until the reset by the real clock, but the poster already waits for the
	// reset itself (with Now and Sleep), and a fresh client keeps the two
	// from disagreeing.
	newAPI func() api

	// Now and Sleep are the clock; tests replace them so that nothing waits
	// for real. Sleep returns early with ctx's error when ctx is done.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	Retry Retry
	// Log receives progress; never the token.
	Log *slog.Logger
}

// api holds the go-github methods the poster uses.
type api struct {
	listByRepo    func(ctx context.Context, owner, repo string, opts *github.IssueListByRepoOptions) ([]*github.Issue, *github.Response, error)
	listComments  func(ctx context.Context, owner, repo string, number int, opts *github.IssueListCommentsOptions) ([]*github.IssueComment, *github.Response, error)
	createIssue   func(ctx context.Context, owner, repo string, req *github.IssueRequest) (*github.Issue, *github.Response, error)
	createComment func(ctx context.Context, owner, repo string, number int, c *github.IssueComment) (*github.IssueComment, *github.Response, error)
	editIssue     func(ctx context.Context, owner, repo string, number int, req *github.IssueRequest) (*github.Issue, *github.Response, error)
	editComment   func(ctx context.Context, owner, repo string, id int64, c *github.IssueComment) (*github.IssueComment, *github.Response, error)
}

func apiOf(c *github.Client) api {
	return api{
		listByRepo:    c.Issues.ListByRepo,
		listComments:  c.Issues.ListComments,
		createIssue:   c.Issues.Create,
		createComment: c.Issues.CreateComment,
		editIssue:     c.Issues.Edit,
		editComment:   c.Issues.EditComment,
	}
}

// ErrNoRepo is returned by NewPoster when no repository is configured.
var ErrNoRepo = errors.New("no GitHub repository configured: set github.repo (owner/name) in the config file")

// NewPoster returns a poster for o. A missing token is not an error here:
// such a poster can only plan (dry run); posting says the token is missing.
func NewPoster(o GitHubOptions) (*Poster, error) {
	owner, repo, ok := strings.Cut(o.Repo, "/")
	if o.Repo == "" {
		return nil, ErrNoRepo
	}
	if !ok || owner == "" || repo == "" || strings.Contains(repo, "/") {
		return nil, fmt.Errorf("github repository %q must be owner/name", o.Repo)
	}
	if len(o.Labels) == 0 {
		return nil, errors.New("github labels are empty: the first label is how the bot finds its own issues; set github.labels")
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	var base *url.URL
	if o.APIURL != "" {
		u, err := url.Parse(o.APIURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("github api_url %q is not an absolute URL such as https://github.example.com/api/v3/", o.APIURL)
		}
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		base = u
	}
	token := o.Token
	newClient := func() *github.Client {
		c := github.NewClient(hc)
		if token != "" {
			c = c.WithAuthToken(token)
		}
		if base != nil {
			u := *base
			c.BaseURL = &u
		}
		c.UserAgent = "pgbisect"
		return c
	}
	reportURL := o.ReportURL
	if reportURL != "" && !strings.HasSuffix(reportURL, "/") {
		reportURL += "/"
	}
	return &Poster{
		owner: owner, repo: repo, labels: o.Labels, reportURL: reportURL, canLookup: token != "",
		newAPI: func() api { return apiOf(newClient()) },
		Now:    time.Now,
		Sleep:  sleepCtx,
		Retry:  DefaultRetry,
		Log:    slog.New(slog.DiscardHandler),
	}, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Repo returns owner/name.
func (p *Poster) Repo() string { return p.owner + "/" + p.repo }

// Labels returns the labels put on new issues.
func (p *Poster) Labels() []string { return p.labels }

// Body renders the issue or comment body of finding f for target t.
func (p *Poster) Body(f *finding.Finding, t Target) string {
	o := Options{MaxLen: MaxBody, Marker: marker(f.ID, t.Key)}
	if p.reportURL != "" {
		o.PlotURL = p.reportURL + url.PathEscape(f.ID) + "/"
	}
	return Markdown(f, o)
}

// marker is the hidden first line of every body the poster writes. It lets
// the poster find a post it made but could not record (a crash, a lost
// response), so that nothing is posted twice.
func marker(id, key string) string {
	return fmt.Sprintf("<!-- pgbisect finding=%s key=%s -->", id, strings.ReplaceAll(key, "--", "- -"))
}

// Name implements Channel: "github owner/repo".
func (p *Poster) Name() string { return "github " + p.Repo() }

// Deliver posts every pending finding of out to the repository (the
// package's Deliver through this channel).
func (p *Poster) Deliver(ctx context.Context, out Outbox) (Delivery, error) {
	return Deliver(ctx, p, out)
}

// PostFinding posts the targets of f that have no post in done, calling
// record right after each post. It stops at the first failure: the targets
// not posted stay pending.
func (p *Poster) PostFinding(ctx context.Context, f *finding.Finding, done []finding.Post, record func(finding.Post) error) ([]finding.Post, error) {
	if !p.canLookup {
		return nil, errors.New("GITHUB_TOKEN is not set: export a token that may create issues and comments in the repository (findings stay pending)")
	}
	var made []finding.Post
	for _, t := range Remaining(f, done) {
		post, err := p.postTarget(ctx, f, t)
		if err != nil {
			return made, fmt.Errorf("posting finding %s to %s (%s): %w; it stays pending", f.ID, p.Repo(), t.Key, err)
		}
		made = append(made, post)
		if err := record(post); err != nil {
			return made, fmt.Errorf("recording the post of finding %s (%s, issue #%d): %w", f.ID, t.Key, post.Issue, err)
		}
		p.Log.Info("posted finding", slog.String("finding", f.ID), slog.String("action", post.Action),
			slog.Int("issue", post.Issue), slog.String("url", post.URL))
	}
	return made, nil
}

// UpdateFinding replaces the body of each post already made for f (posts,
// as recorded) with f's report as it is now: the issue a post created is
// edited, the comment a post made is edited. Nothing new is posted, so a
// finding updated after it was posted (the revert checks and profiles that
// follow a bisection's answer) is not posted twice. It returns the posts
// it edited.
func (p *Poster) UpdateFinding(ctx context.Context, f *finding.Finding, posts []finding.Post) ([]finding.Post, error) {
	if !p.canLookup {
		return nil, errors.New("GITHUB_TOKEN is not set: export a token that may edit issues and comments in the repository")
	}
	var edited []finding.Post
	for _, t := range Targets(f) {
		i := slices.IndexFunc(posts, func(pst finding.Post) bool { return pst.Key == t.Key })
		if i < 0 {
			continue
		}
		pst := posts[i]
		body := github.String(p.Body(f, t))
		var err error
		switch {
		case pst.Action == finding.ActionCreated && pst.Issue > 0:
			err = p.do(ctx, fmt.Sprintf("editing issue #%d", pst.Issue), func(a api) error {
				_, _, err := a.editIssue(ctx, p.owner, p.repo, pst.Issue, &github.IssueRequest{Body: body})
				return err
			})
		case pst.Action == finding.ActionCommented && pst.CommentID > 0:
			err = p.do(ctx, fmt.Sprintf("editing comment %d on issue #%d", pst.CommentID, pst.Issue), func(a api) error {
				_, _, err := a.editComment(ctx, p.owner, p.repo, pst.CommentID, &github.IssueComment{Body: body})
				return err
			})
		default:
			continue // skipped: nothing was posted
		}
		if err != nil {
			return edited, fmt.Errorf("updating the post of finding %s (%s): %w", f.ID, t.Key, err)
		}
		edited = append(edited, pst)
	}
	return edited, nil
}

func (p *Poster) postTarget(ctx context.Context, f *finding.Finding, t Target) (finding.Post, error) {
	post := finding.Post{Key: t.Key, Repo: p.Repo(), At: p.Now().UTC()}
	body := p.Body(f, t)
	mark := marker(f.ID, t.Key)
	issue, err := p.findIssue(ctx, t.Key)
	if err != nil {
		return post, err
	}
	if issue == nil {
		if !t.Create {
			post.Action = finding.ActionSkipped
			post.Note = "no open issue for " + t.Key
			return post, nil
		}
		req := &github.IssueRequest{Title: github.String(t.Title), Body: github.String(body), Labels: &p.labels}
		var created *github.Issue
		err := p.do(ctx, "creating an issue", func(a api) error {
			var err error
			created, _, err = a.createIssue(ctx, p.owner, p.repo, req)
			return err
		})
		if err != nil {
			return post, err
		}
		post.Action, post.Issue, post.URL = finding.ActionCreated, created.GetNumber(), created.GetHTMLURL()
		return post, nil
	}

	post.Issue = issue.GetNumber()
	if strings.HasPrefix(issue.GetBody(), mark) {
		// We created this issue but could not record it.
		post.Action, post.URL, post.Note = finding.ActionCreated, issue.GetHTMLURL(), "found on GitHub: the post had not been recorded"
		return post, nil
	}
	if c, err := p.findComment(ctx, issue.GetNumber(), mark); err != nil {
		return post, err
	} else if c != nil {
		post.Action, post.CommentID, post.URL, post.Note = finding.ActionCommented, c.GetID(), c.GetHTMLURL(), "found on GitHub: the post had not been recorded"
		return post, nil
	}
	var c *github.IssueComment
	err = p.do(ctx, fmt.Sprintf("commenting on issue #%d", issue.GetNumber()), func(a api) error {
		var err error
		c, _, err = a.createComment(ctx, p.owner, p.repo, issue.GetNumber(), &github.IssueComment{Body: github.String(body)})
		return err
	})
	if err != nil {
		return post, err
	}
	post.Action, post.CommentID, post.URL = finding.ActionCommented, c.GetID(), c.GetHTMLURL()
	return post, nil
}

// findIssue returns the newest open issue with the bot's label whose title
// starts with key, or nil.
//
// It lists the repository's open issues by label rather than using the
// search API: search is eventually consistent (an issue created a minute
// ago may be missing, so two findings about one culprit in one run would
// open two issues), has its own low rate limit (30 requests a minute), and
// matches words in titles, not exact titles. Listing is consistent, and the
// bot's open issues are few.
func (p *Poster) findIssue(ctx context.Context, key string) (*github.Issue, error) {
	opts := &github.IssueListByRepoOptions{State: "open", Labels: p.labels[:1], Sort: "created", Direction: "desc",
		ListOptions: github.ListOptions{PerPage: 100}}
	for page := 1; page <= 50; page++ {
		opts.Page = page
		var issues []*github.Issue
		var resp *github.Response
		err := p.do(ctx, "listing open issues", func(a api) error {
			var err error
			issues, resp, err = a.listByRepo(ctx, p.owner, p.repo, opts)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, is := range issues {
			title := is.GetTitle()
			if !is.IsPullRequest() && (title == key || strings.HasPrefix(title, key+" ")) {
				return is, nil
			}
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
	}
	return nil, nil
}

// findComment returns the comment of issue number whose body starts with
// mark, or nil.
func (p *Poster) findComment(ctx context.Context, number int, mark string) (*github.IssueComment, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for page := 1; page <= 50; page++ {
		opts.Page = page
		var cs []*github.IssueComment
		var resp *github.Response
		err := p.do(ctx, fmt.Sprintf("listing comments of issue #%d", number), func(a api) error {
			var err error
			cs, resp, err = a.listComments(ctx, p.owner, p.repo, number, opts)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if strings.HasPrefix(c.GetBody(), mark) {
				return c, nil
			}
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
	}
	return nil, nil
}

// Planned is what posting one target would do.
type Planned struct {
	Target Target
	// Action is "create", "comment" or "skip"; "create or comment" when
	// the open issues could not be looked at (no token).
	Action string
	Issue  int // the issue commented on
	Repo   string
	Labels []string
	Body   string
}

// Plan says what posting f would do, without posting: the dry run. It looks
// at the open issues when it has a token.
func (p *Poster) Plan(ctx context.Context, f *finding.Finding, done []finding.Post) ([]Planned, error) {
	var plan []Planned
	for _, t := range Remaining(f, done) {
		pl := Planned{Target: t, Repo: p.Repo(), Body: p.Body(f, t)}
		switch {
		case !p.canLookup && t.Create:
			pl.Action = "create or comment"
		case !p.canLookup:
			pl.Action = "comment or skip"
		default:
			is, err := p.findIssue(ctx, t.Key)
			if err != nil {
				return plan, err
			}
			switch {
			case is != nil:
				pl.Action, pl.Issue = "comment", is.GetNumber()
			case t.Create:
				pl.Action = "create"
			default:
				pl.Action = "skip"
			}
		}
		if strings.HasPrefix(pl.Action, "create") {
			pl.Labels = p.labels
		}
		plan = append(plan, pl)
	}
	return plan, nil
}
