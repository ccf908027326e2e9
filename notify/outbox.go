package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gofrs/flock"
)

// Outbox is where findings wait to be posted. The results store implements
// it on PostgreSQL; Dir implements it on files under the state directory.
//
// A finding is pending while some target of it (Targets) has no recorded
// Post; Remaining computes that, so every implementation agrees.
type Outbox interface {
	// Pending returns the findings with a target not yet posted, each with
	// the posts already made for it, oldest first.
	Pending(ctx context.Context) ([]Outgoing, error)
	// MarkPosted records one post made for the finding id. It must be
	// durable when it returns: the poster calls it right after each post,
	// and a post that is not recorded is looked for again on GitHub.
	MarkPosted(ctx context.Context, id string, p Post) error
}

// Outgoing is a finding with the posts already made for it.
type Outgoing struct {
	Finding *Finding
	Posts   []Post
}

// Post records one thing posted (or deliberately not posted) for a target
// of a finding.
type Post struct {
	// Key is the Target.Key the post was for.
	Key string `json:"key"`
	// Action is "created" (a new issue), "commented" or "skipped" (no
	// open issue to comment on, for a target that may not create one).
	Action string `json:"action"`
	// Issue is the issue number; CommentID the comment's id.
	Issue     int    `json:"issue,omitempty"`
	CommentID int64  `json:"comment_id,omitempty"`
	URL       string `json:"url,omitempty"`
	// Repo is owner/name the post went to.
	Repo string    `json:"repo,omitempty"`
	At   time.Time `json:"at"`
	// Note says why a post was skipped, or that it was found on GitHub
	// rather than made (a post whose recording was interrupted).
	Note string `json:"note,omitempty"`
}

// The post actions.
const (
	ActionCreated   = "created"
	ActionCommented = "commented"
	ActionSkipped   = "skipped"
)

// Remaining returns the targets of f with no post in posts.
func Remaining(f *Finding, posts []Post) []Target {
	var left []Target
	for _, t := range Targets(f) {
		if !slices.ContainsFunc(posts, func(p Post) bool { return p.Key == t.Key }) {
			left = append(left, t)
		}
	}
	return left
}

// Dir is an Outbox in a directory, normally <state>/findings: each finding
// is <id>.json, and the posts made for it are <id>.posts.json. Files are
// replaced atomically, so a crash leaves either the old or the new record.
type Dir struct {
	Path string
}

// FindingsDir returns the Dir under a state directory.
func FindingsDir(stateDir string) *Dir {
	return &Dir{Path: filepath.Join(stateDir, "findings")}
}

var _ Outbox = (*Dir)(nil)

func (d *Dir) findingPath(id string) string { return filepath.Join(d.Path, id+".json") }
func (d *Dir) postsPath(id string) string   { return filepath.Join(d.Path, id+".posts.json") }

// Add records f (replacing an earlier record with the same ID). Its posts,
// if any, are kept.
func (d *Dir) Add(ctx context.Context, f *Finding) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return fmt.Errorf("creating findings directory: %w", err)
	}
	data, err := Marshal(f)
	if err != nil {
		return err
	}
	return writeFileAtomic(d.findingPath(f.ID), data)
}

// ErrNotFound is returned by Load for an unknown finding.
var ErrNotFound = errors.New("finding not found")

// Load returns the finding id and its posts.
func (d *Dir) Load(ctx context.Context, id string) (Outgoing, error) {
	if !idRE.MatchString(id) {
		return Outgoing{}, fmt.Errorf("finding id %q: %w", id, ErrNotFound)
	}
	f, err := ReadFile(d.findingPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return Outgoing{}, fmt.Errorf("finding %s in %s: %w (list them with ls %s)", id, d.Path, ErrNotFound, d.Path)
	}
	if err != nil {
		return Outgoing{}, err
	}
	posts, err := d.posts(id)
	if err != nil {
		return Outgoing{}, err
	}
	return Outgoing{Finding: f, Posts: posts}, nil
}

func (d *Dir) posts(id string) ([]Post, error) {
	data, err := os.ReadFile(d.postsPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading posts of finding %s: %w", id, err)
	}
	var posts []Post
	if err := json.Unmarshal(data, &posts); err != nil {
		return nil, fmt.Errorf("reading posts of finding %s: %s: %w", id, d.postsPath(id), err)
	}
	return posts, nil
}

// Pending implements Outbox.
func (d *Dir) Pending(ctx context.Context) ([]Outgoing, error) {
	entries, err := os.ReadDir(d.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing findings: %w", err)
	}
	var out []Outgoing
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".posts.json") || strings.HasPrefix(name, ".") {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		o, err := d.Load(ctx, strings.TrimSuffix(name, ".json"))
		if err != nil {
			return nil, err
		}
		if len(Remaining(o.Finding, o.Posts)) > 0 {
			out = append(out, o)
		}
	}
	// IDs start with the start time (NewID), so this is oldest first.
	slices.SortFunc(out, func(a, b Outgoing) int { return strings.Compare(a.Finding.ID, b.Finding.ID) })
	return out, nil
}

// MarkPosted implements Outbox.
func (d *Dir) MarkPosted(ctx context.Context, id string, p Post) error {
	posts, err := d.posts(id)
	if err != nil {
		return err
	}
	posts = append(posts, p)
	data, err := json.MarshalIndent(posts, "", "  ")
	if err != nil {
		return fmt.Errorf("recording post of finding %s: %w", id, err)
	}
	return writeFileAtomic(d.postsPath(id), append(data, '\n'))
}

// Lock takes an exclusive lock on the directory so that two posters (the
// daemon and a person running pgbisect post) never post the same finding at
// once. It waits for the lock until ctx is done.
func (d *Dir) Lock(ctx context.Context) (unlock func(), err error) {
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return nil, fmt.Errorf("creating findings directory: %w", err)
	}
	l := flock.New(filepath.Join(d.Path, ".post.lock"))
	ok, err := l.TryLockContext(ctx, 200*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", d.Path, err)
	}
	if !ok {
		return nil, fmt.Errorf("locking %s: another pgbisect is posting", d.Path)
	}
	return func() { l.Unlock() }, nil
}
