package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/google/go-github/v60/github"
)

// do runs call with a fresh API, retrying what can succeed later: server
// errors (5xx), network failures, and rate limits, for which it waits until
// the reset time GitHub returned. Other failures (401, 403, 404, 422) are
// permanent and returned at once.
func (p *Poster) do(ctx context.Context, what string, call func(api) error) error {
	r := p.Retry
	if r.Attempts <= 0 {
		r.Attempts = DefaultRetry.Attempts
	}
	if r.Backoff <= 0 {
		r.Backoff = DefaultRetry.Backoff
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = DefaultRetry.MaxBackoff
	}
	if r.MaxWait <= 0 {
		r.MaxWait = DefaultRetry.MaxWait
	}
	var waited time.Duration
	for attempt := 1; ; attempt++ {
		err := call(p.newAPI())
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait, why, retry := p.retryAfter(err, attempt, r)
		if !retry {
			return fmt.Errorf("%s: %w", what, err)
		}
		if attempt >= r.Attempts {
			return fmt.Errorf("%s: giving up after %d attempts: %w", what, attempt, err)
		}
		if waited+wait > r.MaxWait {
			return fmt.Errorf("%s: %s needs a wait of %s, more than the %s allowed: %w", what, why, wait.Round(time.Second), r.MaxWait, err)
		}
		p.Log.Warn("github request failed, retrying", slog.String("request", what), slog.String("reason", why),
			slog.Duration("wait", wait), slog.Int("attempt", attempt))
		if err := p.Sleep(ctx, wait); err != nil {
			return err
		}
		waited += wait
	}
}

// retryAfter classifies err: whether to retry, after how long, and why.
func (p *Poster) retryAfter(err error, attempt int, r Retry) (time.Duration, string, bool) {
	backoff := r.Backoff << (attempt - 1)
	if backoff > r.MaxBackoff || backoff <= 0 {
		backoff = r.MaxBackoff
	}
	var rl *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	var er *github.ErrorResponse
	switch {
	case errors.As(err, &rl):
		if rl.Rate.Reset.IsZero() {
			return backoff, "rate limit", true
		}
		// A second of margin: GitHub's reset is in whole seconds.
		wait := rl.Rate.Reset.Sub(p.Now()) + time.Second
		return max(wait, time.Second), "rate limit until " + rl.Rate.Reset.UTC().Format(time.RFC3339), true
	case errors.As(err, &abuse):
		if abuse.RetryAfter != nil && *abuse.RetryAfter > 0 {
			return *abuse.RetryAfter, "secondary rate limit", true
		}
		// GitHub asks to wait at least a minute when it gives no time.
		return max(backoff, time.Minute), "secondary rate limit", true
	case errors.As(err, &er) && er.Response != nil:
		code := er.Response.StatusCode
		if code == http.StatusTooManyRequests || (code == http.StatusForbidden && er.Response.Header.Get("Retry-After") != "") {
			if s, err := strconv.Atoi(er.Response.Header.Get("Retry-After")); err == nil && s > 0 {
				return time.Duration(s) * time.Second, "too many requests", true
			}
			return max(backoff, time.Minute), "too many requests", true
		}
		if code >= 500 {
			return backoff, fmt.Sprintf("server error %d", code), true
		}
		return 0, "", false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 0, "", false
	}
	var ae *github.AcceptedError
	if errors.As(err, &ae) {
		return backoff, "accepted, not done", true
	}
	// Anything else is the network: a reset connection, a timeout.
	return backoff, "network: " + err.Error(), true
}
