package notify

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v60/github"
)

// Requests come to the bot in issue and pull-request comments:
//
//	@pgbisect bisect copy-concurrent --good 1cbbee0338 --bad 00d1e02be2 --point clients=4
//
// This file reads them from GitHub, by polling or from a webhook, and
// answers in the same thread. What a command means and what it starts is
// the caller's: Intake only finds, authorizes and answers.

// Mention is one command addressed to the bot in a comment.
type Mention struct {
	CommentID int64 `json:"comment_id"`
	// Index numbers the commands of one comment from 0.
	Index   int       `json:"index"`
	Issue   int       `json:"issue"` // issue or pull request number
	User    string    `json:"user"`  // who wrote the comment
	Updated time.Time `json:"updated"`
	URL     string    `json:"url"` // the comment's page
	// Line is the command after the handle ("bisect copy-single --good
	// ..."); Args is Line split as a shell would.
	Line string   `json:"line"`
	Args []string `json:"args"`
	// Err is why Line could not be split (an unclosed quote); the caller
	// answers it.
	Err string `json:"err,omitempty"`
	// Dropped, on the mention after the comment's first
	// MaxCommandsPerComment (which has no Line), counts the commands
	// past them that are not taken: the caller refuses them in one reply.
	Dropped int `json:"dropped,omitempty"`
}

// MaxCommandsPerComment is how many commands of one comment the bot
// takes; the rest are refused together, so one comment of 3,000 lines
// costs at most this many answers and API calls, not 3,000.
const MaxCommandsPerComment = 5

// Commands returns the command lines addressed to handle ("@pgbisect") in
// a comment body: lines that start with the handle, outside fenced or
// indented code blocks and quotes, so that the bot never acts on an
// example, on a quoted request or on its own answers.
func Commands(body, handle string) []string {
	var out []string
	fence := ""
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		if fence != "" {
			if strings.HasPrefix(line, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
			fence = line[:3]
			continue
		}
		if strings.HasPrefix(raw, "    ") || strings.HasPrefix(raw, "\t") || strings.HasPrefix(line, ">") {
			continue
		}
		rest, ok := strings.CutPrefix(line, handle)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			continue // "@pgbisectfan" is someone else
		}
		out = append(out, strings.TrimSpace(rest))
	}
	return out
}

// SplitArgs splits a command line as a POSIX shell would split words:
// single quotes keep everything, double quotes keep all but \" and \\,
// a backslash outside quotes escapes the next character.
func SplitArgs(line string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				args, inWord = append(args, cur.String()), false
				cur.Reset()
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unclosed ' in %q: close the quote", line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\') {
					i++
				}
				cur.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, fmt.Errorf("unclosed \" in %q: close the quote", line)
			}
			inWord = true
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args, nil
}

// ETagCache keeps the last ETag and body of each GET the bot made, so that
// the next poll can ask "has it changed?". GitHub answers an unchanged
// resource with 304, which costs no rate limit. The results store keeps
// them, so a restarted bot polls for free too.
type ETagCache interface {
	ETag(ctx context.Context, key string) (etag string, body []byte, ok bool, err error)
	PutETag(ctx context.Context, key, etag string, body []byte) error
}

// ETagTransport is an http.RoundTripper making GETs conditional with the
// ETags in Cache. go-github treats a 304 as an error, so a 304 is answered
// with the cached body as a 200 (with the header X-From-Cache: 1). Other
// requests pass through unchanged.
type ETagTransport struct {
	Base  http.RoundTripper // nil: http.DefaultTransport
	Cache ETagCache
}

// RoundTrip implements http.RoundTripper.
func (t *ETagTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.Method != http.MethodGet || t.Cache == nil || strings.Contains(req.Header.Get("Accept"), "diff") {
		// A pull request's diff is fetched once per command, and would
		// share its key with the pull request's JSON.
		return base.RoundTrip(req)
	}
	key := etagKey(req)
	etag, cached, have, err := t.Cache.ETag(req.Context(), key)
	if err != nil {
		return nil, fmt.Errorf("reading the ETag of %s: %w", req.URL.Path, err)
	}
	if have {
		req = req.Clone(req.Context())
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && have:
		resp.Body.Close()
		resp.StatusCode, resp.Status = http.StatusOK, "200 OK (cached)"
		resp.Header.Set("X-From-Cache", "1")
		resp.Body = io.NopCloser(bytes.NewReader(cached))
		resp.ContentLength = int64(len(cached))
	case resp.StatusCode == http.StatusOK && resp.Header.Get("ETag") != "":
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if err := t.Cache.PutETag(req.Context(), key, resp.Header.Get("ETag"), body); err != nil {
			return nil, fmt.Errorf("keeping the ETag of %s: %w", req.URL.Path, err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	return resp, nil
}

// etagKey names a GET by its path and query, without the host: the same
// request against another API URL is another resource anyway, and the
// token never appears in a URL.
func etagKey(req *http.Request) string {
	return req.URL.Host + req.URL.RequestURI()
}

// IntakeOptions say where the bot reads its requests.
type IntakeOptions struct {
	GitHubOptions
	// Handle addresses the bot in a comment. Default: "@pgbisect".
	Handle string
	// Allow lists users who may start jobs without write permission on
	// the repository.
	Allow []string
	// Cache keeps ETags (nil: every poll costs rate limit).
	Cache ETagCache
}

// Intake reads commands from the comments of one repository and answers
// them. Its go-github calls go through ETagTransport.
type Intake struct {
	owner, repo, handle string
	allow               map[string]bool
	client              *github.Client

	mu    sync.Mutex
	login string // the bot's own login, once known
}

// NewIntake returns an Intake for o. It needs a token: GitHub lists
// comments without one, but the bot must know who it is to ignore itself.
func NewIntake(o IntakeOptions) (*Intake, error) {
	p, err := NewPoster(o.GitHubOptions)
	if err != nil {
		return nil, err
	}
	if o.Token == "" {
		return nil, errors.New("reading requests from GitHub needs a token: set GITHUB_TOKEN")
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	c := *hc
	c.Transport = &ETagTransport{Base: hc.Transport, Cache: o.Cache}
	client := github.NewClient(&c).WithAuthToken(o.Token)
	if o.APIURL != "" {
		u, _ := url.Parse(o.APIURL) // checked by NewPoster
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		client.BaseURL = u
	}
	client.UserAgent = "pgbisect"
	handle := o.Handle
	if handle == "" {
		handle = "@pgbisect"
	}
	allow := map[string]bool{}
	for _, u := range o.Allow {
		allow[strings.ToLower(u)] = true
	}
	return &Intake{owner: p.owner, repo: p.repo, handle: handle, allow: allow, client: client}, nil
}

// Login returns the bot's own GitHub login (asked once).
func (in *Intake) Login(ctx context.Context) (string, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.login != "" {
		return in.login, nil
	}
	u, _, err := in.client.Users.Get(ctx, "")
	if err != nil {
		return "", fmt.Errorf("asking GitHub who the bot is: %w", err)
	}
	in.login = u.GetLogin()
	return in.login, nil
}

// Poll returns the commands in comments created or edited at or after
// since, oldest first, and the cursor for the next poll (the newest
// update seen, or since). Comments are listed repository-wide, sorted by
// update time, so an edited comment comes back: the caller's record of
// handled comments keeps it from being acted on twice. The bot's own
// comments are skipped.
func (in *Intake) Poll(ctx context.Context, since time.Time) ([]Mention, time.Time, error) {
	me, err := in.Login(ctx)
	if err != nil {
		return nil, since, err
	}
	opts := &github.IssueListCommentsOptions{Sort: github.String("updated"), Direction: github.String("asc"),
		ListOptions: github.ListOptions{PerPage: 100}}
	if !since.IsZero() {
		opts.Since = &since
	}
	next := since
	var out []Mention
	for {
		cs, resp, err := in.client.Issues.ListComments(ctx, in.owner, in.repo, 0, opts)
		if err != nil {
			return nil, since, fmt.Errorf("listing comments of %s/%s: %w", in.owner, in.repo, err)
		}
		for _, c := range cs {
			if c.GetUpdatedAt().Time.After(next) {
				next = c.GetUpdatedAt().Time
			}
			if strings.EqualFold(c.GetUser().GetLogin(), me) {
				continue
			}
			out = append(out, in.mentions(c.GetID(), issueNumber(c.GetIssueURL()), c.GetUser().GetLogin(),
				c.GetUpdatedAt().Time, c.GetHTMLURL(), c.GetBody())...)
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out, next, nil
}

// mentions are the commands of one comment: the first
// MaxCommandsPerComment, then one mention counting the rest (Dropped).
func (in *Intake) mentions(id int64, issue int, user string, updated time.Time, link, body string) []Mention {
	var out []Mention
	lines, dropped := TakenCommands(body, in.handle)
	for i, line := range lines {
		m := Mention{CommentID: id, Index: i, Issue: issue, User: user, Updated: updated, URL: link, Line: line}
		args, err := SplitArgs(line)
		if err != nil {
			m.Err = err.Error()
		}
		m.Args = args
		out = append(out, m)
	}
	if dropped > 0 {
		out = append(out, Mention{CommentID: id, Index: len(lines), Issue: issue, User: user, Updated: updated, URL: link, Dropped: dropped})
	}
	return out
}

// TakenCommands are the command lines of a comment the bot takes (the
// first MaxCommandsPerComment of Commands) and how many more it does not.
func TakenCommands(body, handle string) (taken []string, dropped int) {
	lines := Commands(body, handle)
	if len(lines) <= MaxCommandsPerComment {
		return lines, 0
	}
	return lines[:MaxCommandsPerComment], len(lines) - MaxCommandsPerComment
}

// issueNumber reads the number at the end of a comment's issue_url.
func issueNumber(u string) int {
	n, _ := strconv.Atoi(u[strings.LastIndexByte(u, '/')+1:])
	return n
}

// ErrBadSignature is returned by Webhook for a delivery whose signature
// does not match the secret.
var ErrBadSignature = errors.New("webhook signature does not match the configured secret")

// ErrPayloadTooLarge is returned by Webhook for a delivery whose body was
// cut off by the server's limit (an http.MaxBytesReader): its signature
// was not checked.
var ErrPayloadTooLarge = errors.New("webhook payload over the server's limit")

// Webhook reads one issue_comment delivery. It checks the signature with
// github.ValidatePayload, and returns the delivery ID (for the caller to
// make replays harmless) and the commands of a created or edited comment.
// Other events and actions give no mentions and no error. ValidatePayload
// reads the whole body first: the server bounds it (an http.MaxBytesReader
// gives ErrPayloadTooLarge here).
func (in *Intake) Webhook(ctx context.Context, r *http.Request, secret []byte) (delivery string, ms []Mention, err error) {
	if r.Header.Get(github.SHA256SignatureHeader) == "" && r.Header.Get(github.SHA1SignatureHeader) == "" {
		// Refused unread: nothing can make an unsigned body worth reading.
		return "", nil, fmt.Errorf("%w: the delivery has no %s header", ErrBadSignature, github.SHA256SignatureHeader)
	}
	payload, err := github.ValidatePayload(r, secret)
	if errors.As(err, new(*http.MaxBytesError)) {
		return "", nil, fmt.Errorf("%w: %v", ErrPayloadTooLarge, err)
	}
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	delivery = github.DeliveryID(r)
	if github.WebHookType(r) != "issue_comment" {
		// Not read at all: go-github's error for an unknown event quotes
		// the header whole (found by FuzzWebhook), and no other event
		// carries commands.
		return delivery, nil, nil
	}
	event, err := github.ParseWebHook("issue_comment", payload)
	if err != nil {
		return delivery, nil, fmt.Errorf("reading the webhook payload: %w", err)
	}
	ev, ok := event.(*github.IssueCommentEvent)
	if !ok || (ev.GetAction() != "created" && ev.GetAction() != "edited") {
		return delivery, nil, nil
	}
	if !strings.EqualFold(ev.GetRepo().GetFullName(), in.owner+"/"+in.repo) {
		return delivery, nil, nil
	}
	me, err := in.Login(ctx)
	if err != nil {
		return delivery, nil, err
	}
	c := ev.GetComment()
	if strings.EqualFold(c.GetUser().GetLogin(), me) {
		return delivery, nil, nil
	}
	return delivery, in.mentions(c.GetID(), ev.GetIssue().GetNumber(), c.GetUser().GetLogin(), c.GetUpdatedAt().Time, c.GetHTMLURL(), c.GetBody()), nil
}

// Authorized says whether user may start jobs: listed in Allow, or with
// write, maintain or admin permission on the repository. why names the
// permission found, for the refusal.
func (in *Intake) Authorized(ctx context.Context, user string) (ok bool, why string, err error) {
	a, err := in.Access(ctx, user)
	return a.Allowed, a.Why, err
}

// Access is what a commenter may do.
type Access struct {
	// Allowed: listed in Allow, or with write, maintain or admin
	// permission on the repository; such a user may start jobs and
	// cancel their own.
	Allowed bool
	// Maintainer: admin or maintain permission; such a user may also
	// cancel anyone's jobs, nightly passes included. A user only listed
	// in Allow is not one.
	Maintainer bool
	// Why names the permission found, for a refusal.
	Why string
}

// Access says what user may do on the repository (Access), asking GitHub
// once, unless user is listed in Allow.
func (in *Intake) Access(ctx context.Context, user string) (Access, error) {
	if in.allow[strings.ToLower(user)] {
		return Access{Allowed: true, Why: "listed in github.allow"}, nil
	}
	// role_name tells maintain from write; go-github's struct lacks it
	// (its permission field says write for both).
	req, err := in.client.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/collaborators/%s/permission",
		url.PathEscape(in.owner), url.PathEscape(in.repo), url.PathEscape(user)), nil)
	if err != nil {
		return Access{}, fmt.Errorf("asking GitHub for %s's permission on %s/%s: %w", user, in.owner, in.repo, err)
	}
	var p struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	if _, err := in.client.Do(ctx, req, &p); err != nil {
		return Access{}, fmt.Errorf("asking GitHub for %s's permission on %s/%s: %w", user, in.owner, in.repo, err)
	}
	level := p.RoleName
	if level == "" {
		level = p.Permission
	}
	switch level {
	case "admin", "maintain":
		return Access{Allowed: true, Maintainer: true, Why: level + " permission"}, nil
	case "write":
		return Access{Allowed: true, Why: "write permission"}, nil
	}
	return Access{Why: fmt.Sprintf("%s permission on %s/%s", orNone(level), in.owner, in.repo)}, nil
}

func orNone(s string) string {
	if s == "" {
		return "no"
	}
	return s
}

// React puts a reaction ("eyes", "+1", "confused") on a comment.
func (in *Intake) React(ctx context.Context, commentID int64, content string) error {
	_, _, err := in.client.Reactions.CreateIssueCommentReaction(ctx, in.owner, in.repo, commentID, content)
	if err != nil {
		return fmt.Errorf("reacting to comment %d: %w", commentID, err)
	}
	return nil
}

// Repo returns owner/name.
func (in *Intake) Repo() string { return in.owner + "/" + in.repo }

// Reply comments on an issue and returns the comment's ID.
func (in *Intake) Reply(ctx context.Context, issue int, body string) (int64, error) {
	c, _, err := in.client.Issues.CreateComment(ctx, in.owner, in.repo, issue, &github.IssueComment{Body: &body})
	if err != nil {
		return 0, fmt.Errorf("answering on #%d: %w", issue, err)
	}
	return c.GetID(), nil
}

// EditReply replaces the body of one of the bot's comments.
func (in *Intake) EditReply(ctx context.Context, commentID int64, body string) error {
	_, _, err := in.client.Issues.EditComment(ctx, in.owner, in.repo, commentID, &github.IssueComment{Body: &body})
	if err != nil {
		return fmt.Errorf("editing comment %d: %w", commentID, err)
	}
	return nil
}

// FindComment returns the ID of the bot's comment on issue whose body
// starts with mark, or 0: how an answer posted just before a crash is found
// instead of posted twice.
func (in *Intake) FindComment(ctx context.Context, issue int, mark string) (int64, error) {
	me, err := in.Login(ctx)
	if err != nil {
		return 0, err
	}
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := in.client.Issues.ListComments(ctx, in.owner, in.repo, issue, opts)
		if err != nil {
			return 0, fmt.Errorf("listing the comments of #%d: %w", issue, err)
		}
		for _, c := range cs {
			if strings.EqualFold(c.GetUser().GetLogin(), me) && strings.HasPrefix(c.GetBody(), mark) {
				return c.GetID(), nil
			}
		}
		if resp.NextPage == 0 {
			return 0, nil
		}
		opts.Page = resp.NextPage
	}
}

// RateLimited reports whether err is GitHub refusing for its primary or
// secondary rate limit: the caller should stop asking until later.
func RateLimited(err error) bool {
	var rl *github.RateLimitError
	var ab *github.AbuseRateLimitError
	return errors.As(err, &rl) || errors.As(err, &ab)
}

// NotFound reports whether err is GitHub answering 404: a comment someone
// deleted, an issue that is gone.
func NotFound(err error) bool {
	var er *github.ErrorResponse
	return errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound
}

// Uneditable reports whether err says a comment cannot be edited however
// often it is tried: gone (404, 410), refused (403 that is not a rate
// limit, as on a locked issue) or rejected (422, as for a body too long).
// Rate limits and server errors are not: they pass.
func Uneditable(err error) bool {
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil {
		return false
	}
	var rl *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &rl) || errors.As(err, &abuse) {
		return false
	}
	switch er.Response.StatusCode {
	case http.StatusNotFound, http.StatusGone, http.StatusForbidden, http.StatusUnprocessableEntity:
		return true
	}
	return false
}
