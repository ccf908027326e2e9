package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pgbisect/pgbisect/internal/web"
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
	addr := fs.String("addr", web.DefaultAddr, "address to listen on; the pages are not authenticated, so keep it on loopback or behind a proxy")
	commitURL := fs.String("commit-url", "", "link commit hashes to this URL with the hash appended (e.g. https://github.com/postgres/postgres/commit/)")
	flags := addStoreFlags(fs)
	pos, err := parseFlags(fs, env)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("unexpected argument %q", pos[0])
	}
	cfg, err := flags.load()
	if err != nil {
		return err
	}
	st, done, err := openResults(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer done()
	srv, err := web.New(st, web.Config{Addr: *addr, CommitURL: *commitURL, Log: env.Log})
	if err != nil {
		return err
	}
	ln, err := srv.Listen()
	if err != nil {
		return err
	}
	env.Log.Info("serving the dashboard", slog.String("url", "http://"+ln.Addr().String()+"/"))
	fmt.Fprintf(env.Stderr, "pgbisect: dashboard on http://%s/ (Ctrl-C stops it)\n", ln.Addr())
	return srv.Serve(ctx, ln)
}
