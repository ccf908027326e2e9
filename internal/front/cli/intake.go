package cli

// Requests from GitHub comments (issue 15): the config's translation only.
// notify reads the comments and answers, internal/front/intake parses each
// command and acts on it once, queueing its job on River in the
// transaction that records the comment.

import (
	"context"
	"log/slog"
	"time"

	"github.com/pgbisect/pgbisect/internal/front/config"
	"github.com/pgbisect/pgbisect/internal/front/intake"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

// webhookSecretEnv holds the secret GitHub signs webhook deliveries with.
const webhookSecretEnv = "PGBISECT_WEBHOOK_SECRET"

// newDispatcher returns the dispatcher of the configured repository's
// comments, queueing jobs for class, or nil when GitHub is not configured
// (no repository or no token).
func newDispatcher(cfg *config.Config, st *store.Store, queue *jobs.Queue, class string, log *slog.Logger) (*intake.Dispatcher, error) {
	gh := cfg.GitHub.Options()
	if gh.Repo == "" || gh.Token == "" {
		return nil, nil
	}
	in, err := notify.NewIntake(notify.IntakeOptions{GitHubOptions: gh, Handle: cfg.GitHub.Handle, Allow: cfg.GitHub.Allow, Cache: st})
	if err != nil {
		return nil, err
	}
	return intake.New(intake.Options{
		Intake: in, Store: st, Queue: intake.NewQueue(queue, class), DashboardURL: cfg.GitHub.DashboardURL, RateLimit: cfg.GitHub.RateLimit, Log: log,
		Commands: intake.Commands{Scenarios: scenarioCatalog(cfg),
			Fetcher: &notify.PatchFetcher{Allow: cfg.GitHub.PatchHosts, MaxBytes: int64(cfg.GitHub.MaxPatchKiB) << 10}},
	})
}

// pollComments runs the dispatcher's poll, then brings the answers of the
// jobs it queued up to date (Follow), every interval until ctx ends; a
// failed poll is logged and tried again at the next tick. Without poll
// (only a webhook delivers), it only follows.
func pollComments(ctx context.Context, d *intake.Dispatcher, interval time.Duration, poll bool, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if !poll {
		} else if n, err := d.Poll(ctx); err != nil && ctx.Err() == nil {
			log.Warn("reading GitHub comments", slog.String("err", err.Error()))
		} else if n > 0 {
			log.Info("acted on GitHub comments", slog.Int("commands", n))
		}
		if n, err := d.Follow(ctx); err != nil && ctx.Err() == nil {
			log.Warn("answering on GitHub as jobs run", slog.String("err", err.Error()))
		} else if n > 0 {
			log.Info("answered on GitHub as jobs ran", slog.Int("answers", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
