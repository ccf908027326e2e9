package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/pgbisect/pgbisect/internal/front/config"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/internal/front/web"
	"github.com/pgbisect/pgbisect/store"
)

func init() {
	register(command{
		Name:    "serve",
		Summary: "serve the web dashboard (series, bisections live, findings, /metrics) on 127.0.0.1:8080",
		Run:     serveRun,
	})
}

func serveRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "serve", "[--addr HOST:PORT] [--commit-url URL]")
	addr := fs.String("addr", web.DefaultAddr, "address to listen on; the pages are public unless the config says web.private: true, "+
		"so keep a public one on loopback or behind a proxy; requests (the form, POST /api/requests) need the token in "+webTokenEnv+" (unset: read-only)")
	commitURL := fs.String("commit-url", "", "link commit hashes to this URL with the hash appended (e.g. https://github.com/postgres/postgres/commit/)")
	flags := addStoreFlags(fs)
	if err := parseNoArgs(fs, env, ""); err != nil {
		return err
	}
	cfg, err := flags.load(env.Stderr)
	if err != nil {
		return err
	}
	st, done, err := openResults(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer done()
	queue, err := jobs.NewQueue(st)
	if err != nil {
		return err
	}
	hook, err := webhook(ctx, cfg, st, queue, cfg.Machine.Class, env, true)
	if err != nil {
		return err
	}
	serve, err := dashboard(ctx, env, cfg, st, queue, *addr, *commitURL, cfg.Machine.Class, hook)
	if err != nil {
		return err
	}
	return serve()
}

// dashboard listens on addr and returns the function that serves the
// dashboard over st until ctx ends ('pgbisect serve', and 'pgbisect daemon
// --serve' beside its jobs). Requests posted with the web token are
// queued for class.
func dashboard(ctx context.Context, env *Env, cfg *config.Config, st *store.Store, queue *jobs.Queue, addr, commitURL, class string, hook http.Handler) (func() error, error) {
	wc := web.Config{Addr: addr, CommitURL: commitURL, Log: env.Log, Token: os.Getenv(webTokenEnv), Private: cfg.Web.Private,
		Jobs: queue, Webhook: hook, Scenarios: scenarioCatalog(cfg).Names(), PublicURL: cfg.GitHub.DashboardURL}
	if wc.Private && wc.Token == "" {
		return nil, fmt.Errorf("the config says web.private: true, but %s is not set: a private dashboard needs the token its readers sign in with", webTokenEnv)
	}
	if wc.Token != "" {
		wc.Enqueue = web.Queue{Jobs: queue, Class: class, Scenarios: scenarioCatalog(cfg)}
	}
	srv, err := web.New(st, wc)
	if err != nil {
		return nil, err
	}
	ln, err := srv.Listen()
	if err != nil {
		return nil, err
	}
	env.Log.Info("serving the dashboard", slog.String("url", "http://"+ln.Addr().String()+"/"))
	fmt.Fprintf(env.Stderr, "pgbisect: dashboard on http://%s/ (Ctrl-C stops it)\n", ln.Addr())
	return func() error { return srv.Serve(ctx, ln) }, nil
}

// webTokenEnv holds the dashboard's token (writes, and reads when
// web.private); unset, the dashboard is read-only.
const webTokenEnv = "PGBISECT_WEB_TOKEN"

// webhook is the handler of GitHub's issue_comment deliveries when
// PGBISECT_WEBHOOK_SECRET is set (nil otherwise): it needs the repository
// and GITHUB_TOKEN configured, to check who asks and to answer.
func webhook(ctx context.Context, cfg *config.Config, st *store.Store, queue *jobs.Queue, class string, env *Env, follow bool) (http.Handler, error) {
	secret := os.Getenv(webhookSecretEnv)
	if secret == "" {
		return nil, nil
	}
	d, err := newDispatcher(cfg, st, queue, class, env.Log)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, fmt.Errorf("%s is set but github.repo or GITHUB_TOKEN is not: the webhook needs both to check who asks and to answer", webhookSecretEnv)
	}
	if follow {
		// Nothing polls here: answer as the queued jobs run, once a minute
		// (a daemon that polls does it after each poll).
		go pollComments(ctx, d, time.Minute, false, env.Log)
	}
	return d.Webhook([]byte(secret)), nil
}
