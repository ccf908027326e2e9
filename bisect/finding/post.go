package finding

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrNotFound is returned by lookups of an unknown finding.
var ErrNotFound = errors.New("finding not found")

// Outgoing is a finding with the posts already made for it: what an outbox
// holds until every target of the finding is posted.
type Outgoing struct {
	Finding *Finding
	Posts   []Post
}

// Post records one thing posted (or deliberately not posted) for a target
// of a finding.
type Post struct {
	// Key is the target the post was for (TargetKeys).
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

// TargetKeys returns the keys of the issues f is posted to, in order: one
// per culprit of a regression or improvement, "[master] 9f8377f7a2:" (the
// title prefix that identifies a culprit's issue), or the one culprit a
// FollowUp names; none for a finding without culprits, which is reported,
// not posted. notify adds the titles.
func TargetKeys(f *Finding) []string {
	if f.FollowUp != nil && f.FollowUp.Culprit.Hash != "" {
		branch := f.FollowUp.Branch
		if branch == "" {
			branch = f.Branch
		}
		return []string{fmt.Sprintf("[%s] %s:", branch, KeyHash(f.FollowUp.Culprit))}
	}
	if f.Kind != Regression && f.Kind != Improvement {
		return nil
	}
	keys := make([]string, len(f.Culprits))
	for i := range f.Culprits {
		keys[i] = fmt.Sprintf("[%s] %s:", f.Branch, CulpritKey(&f.Culprits[i]))
	}
	return keys
}

// Unposted returns the keys of TargetKeys(f) with no post in posts. A
// finding is pending while it has one; every outbox decides that here.
func Unposted(f *Finding, posts []Post) []string {
	var left []string
	for _, k := range TargetKeys(f) {
		if !slices.ContainsFunc(posts, func(p Post) bool { return p.Key == k }) {
			left = append(left, k)
		}
	}
	return left
}

// CulpritKey names a culprit in keys and titles: its 10-digit hash, or
// "first..last" of a candidate range.
func CulpritKey(c *Culprit) string {
	if c.IsRange() {
		return KeyHash(c.Range[0]) + ".." + KeyHash(c.Range[len(c.Range)-1])
	}
	return KeyHash(c.Commit)
}

// KeyHash is the 10-digit hash used in keys and titles. It ignores
// Commit.Short so that the key of one culprit never changes with the
// caller's abbreviation.
func KeyHash(c Commit) string {
	if len(c.Hash) >= 10 {
		return c.Hash[:10]
	}
	return c.ShortHash()
}
