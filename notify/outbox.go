// Package notify turns a finding of pgbisect (bisect/finding: a bisected
// regression, a nightly change, an endpoint check that found nothing) into
// reports people read and into GitHub issues.
//
// The one design choice that matters: nothing is computed while rendering
// except formatting, so every report of one finding — the Markdown of an
// issue, the plain text of a mailing-list post, the JSON the results store
// persists, the plots — says the same thing.
//
// Posting goes through an Outbox: a finding is recorded first and posted
// after, one issue per culprit, and every post is recorded, so a finding that
// could not be posted is posted on the next attempt and never twice.
package notify

import (
	"context"
	"slices"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// Outbox is where findings wait to be posted. The results store implements
// it (store.Store), so findings and their posts live next to the
// measurements behind them and several machines drain one outbox.
//
// A finding is pending while some target of it (Targets) has no recorded
// Post; finding.Unposted decides that, so every implementation agrees.
type Outbox interface {
	// Pending returns the findings with a target not yet posted, each with
	// the posts already made for it, oldest first.
	Pending(ctx context.Context) ([]finding.Outgoing, error)
	// MarkPosted records one post made for the finding id. It must be
	// durable when it returns: the poster calls it right after each post,
	// and a post that is not recorded is looked for again on GitHub.
	MarkPosted(ctx context.Context, id string, p finding.Post) error
}

// Remaining returns the targets of f with no post in posts.
func Remaining(f *finding.Finding, posts []finding.Post) []Target {
	left := finding.Unposted(f, posts)
	var out []Target
	for _, t := range Targets(f) {
		if slices.Contains(left, t.Key) {
			out = append(out, t)
		}
	}
	return out
}
