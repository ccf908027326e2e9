package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

// Outbox returns the outbox of the results store, where findings wait to
// be posted. (Findings an older pgbisect left in STATE/findings are moved
// into it once by 'pgbisect db import'.)
func (a *App) Outbox(ctx context.Context, sink Sink) (*store.Store, error) {
	return a.Store(ctx)
}

// Deliver posts the pending findings through the channel (GitHub) when
// posting is configured (a repository and a token); otherwise it does
// nothing. What was posted
// and what was not are notes on sink; a finding that could not be posted
// waits for the next delivery, and the error says how many wait (a post
// job is retried on it).
func (a *App) Deliver(ctx context.Context, _ DeliverRequest, sink Sink) error {
	if a.opts.GitHub.Repo == "" || a.opts.GitHub.Token == "" {
		return nil
	}
	ch, err := a.channel()
	if err != nil {
		sink.note("not posting: %v", err)
		return nil // a configuration error: retrying does not help
	}
	box, err := a.Outbox(ctx, sink)
	if err != nil {
		sink.note("not posting: %v", err)
		return err
	}
	unlock, err := box.Lock(ctx, store.PostLock)
	if err != nil {
		sink.note("not posting: %v", err)
		return err
	}
	defer unlock()
	del, err := notify.Deliver(ctx, ch, box)
	for _, pst := range del.Posts {
		sink.note("posted: %s", PostLine(pst))
	}
	for _, e := range del.Failed {
		sink.note("not posted (waits in %s for 'pgbisect post --pending'): %v", a.StoreName(), e)
	}
	if err != nil {
		sink.note("posting: %v", err)
		return err
	}
	if len(del.Failed) > 0 {
		return fmt.Errorf("%d findings not posted: %w", len(del.Failed), errors.Join(del.Failed...))
	}
	return nil
}

// channel is where findings are posted: the issues of the configured
// GitHub repository (notify.Poster), the first channel and for now the
// only one. A new channel (a notify.Channel) is built here from its own
// section of Options.
func (a *App) channel() (notify.Channel, error) {
	p, err := notify.NewPoster(a.opts.GitHub)
	if err != nil {
		return nil, err
	}
	p.Log = a.log
	return p, nil
}

// PostLine describes what a post did, in one line.
func PostLine(p finding.Post) string {
	switch p.Action {
	case finding.ActionCreated:
		return fmt.Sprintf("created issue #%d\t%s", p.Issue, p.URL)
	case finding.ActionCommented:
		return fmt.Sprintf("commented on issue #%d\t%s", p.Issue, p.URL)
	}
	return fmt.Sprintf("%s\t%s", p.Action, p.Note)
}
