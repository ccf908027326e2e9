package notify

import (
	"context"
	"fmt"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// Channel is a place findings are announced. GitHub issues (Poster) is
// the first; a new channel implements this interface and is built, in
// internal/app, from a config section of its own. The application posts,
// delivers and updates findings through it, never through a channel's own
// type.
//
// A channel posts a finding once per target (Targets: one per culprit)
// and reports each post as a finding.Post, which the Outbox records: a
// finding is pending while a target has none. The outbox keys posts by
// target, not by channel, so one channel at a time delivers a store's
// findings.
type Channel interface {
	// Name names the channel for people: "github owner/repo".
	Name() string
	// PostFinding posts the targets of f that have no post in done,
	// calling record right after each post (before the next), and returns
	// the posts made. It stops at the first failure: the targets not
	// posted stay pending.
	PostFinding(ctx context.Context, f *finding.Finding, done []finding.Post, record func(finding.Post) error) ([]finding.Post, error)
	// UpdateFinding edits the posts already made for f (posts, as
	// recorded) to show f as it is now, posting nothing new, and returns
	// the posts it edited.
	UpdateFinding(ctx context.Context, f *finding.Finding, posts []finding.Post) ([]finding.Post, error)
}

// Delivery says what Deliver did.
type Delivery struct {
	Posts  []finding.Post // posts made (or found) in this run
	Failed []error        // one per finding that stays pending
}

// Deliver posts every pending finding of out through ch, recording each
// post as soon as it is made. A finding that fails stays pending for the
// next run; the others still go out. The error is non-nil only when the
// outbox itself fails or ctx is done.
func Deliver(ctx context.Context, ch Channel, out Outbox) (Delivery, error) {
	var d Delivery
	pending, err := out.Pending(ctx)
	if err != nil {
		return d, fmt.Errorf("listing pending findings: %w", err)
	}
	for _, o := range pending {
		posts, err := ch.PostFinding(ctx, o.Finding, o.Posts, func(pst finding.Post) error {
			return out.MarkPosted(ctx, o.Finding.ID, pst)
		})
		d.Posts = append(d.Posts, posts...)
		if err != nil {
			if ctx.Err() != nil {
				return d, err
			}
			d.Failed = append(d.Failed, err)
		}
	}
	return d, nil
}

// Poster is a Channel.
var _ Channel = (*Poster)(nil)
