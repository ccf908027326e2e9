package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/config"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/outbox"
)

// openResults returns the results store of cfg (its db, else the private
// cluster under the state directory, started if need be) and the function
// that lets go of it. A command the daemon or a nightly pass runs in-process
// gets the store its caller holds.
func openResults(ctx context.Context, env *Env, cfg *config.Config) (*store.Store, func(), error) {
	if env.results != nil {
		return env.results, func() {}, nil
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("creating the state directory: %w", err)
	}
	st, err := store.Open(ctx, store.Config{URL: cfg.DB, StateDir: cfg.StateDir, RunAs: cfg.DBRunAs, Log: env.Log})
	if err != nil {
		return nil, nil, err
	}
	return st, st.Close, nil
}

// recordBuilds makes b keep the builds table of st: every build it makes or
// finds in its cache, and every failure. A store that cannot be written is
// warned about, not fatal: the build itself is fine.
func recordBuilds(b *build.Builder, st *store.Store, log *slog.Logger) {
	b.Record = func(ctx context.Context, key build.Key, inst *build.Install, failure *build.Error) {
		opts, _ := json.Marshal(b.Options())
		rec := store.Build{Key: key.ID, Commit: key.Source, Options: opts}
		if failure != nil {
			rec.Status, rec.LogPath, rec.Error = "failed", failure.LogPath, failure.Tail
		} else {
			rec.Status, rec.Duration, rec.Time = "ok", inst.Duration, inst.BuiltAt
		}
		if err := st.RecordBuild(ctx, rec); err != nil {
			log.Warn("not recorded in the results store", slog.String("build", key.ID), slog.Any("err", err))
		}
	}
}

// outboxOf returns the outbox of st, where findings wait to be posted.
// Findings an older pgbisect left in STATE/findings are moved into it first.
func outboxOf(ctx context.Context, env *Env, st *store.Store, stateDir string) (*outbox.DB, error) {
	box := outbox.New(st)
	files := notify.FindingsDir(stateDir)
	n, err := box.Import(ctx, files)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		fmt.Fprintf(env.Stderr, "moved %d findings from %s into the results store\n", n, files.Path)
	}
	return box, nil
}

// openOutbox opens the results store of cfg and returns its outbox, and the
// function that lets go of the store.
func openOutbox(ctx context.Context, env *Env, cfg *config.Config) (*outbox.DB, func(), error) {
	st, done, err := openResults(ctx, env, cfg)
	if err != nil {
		return nil, nil, err
	}
	box, err := outboxOf(ctx, env, st, cfg.StateDir)
	if err != nil {
		done()
		return nil, nil, err
	}
	return box, done, nil
}

// storeName names the results store of a db URL in messages.
func storeName(url string) string {
	if url == "" {
		return "the private results cluster"
	}
	return redactURL(url)
}

// loadFinding loads finding id from box. The ID of a bisection (as
// status lists it) names the bisection's latest finding.
func loadFinding(ctx context.Context, box *outbox.DB, id string) (notify.Outgoing, error) {
	o, err := box.Load(ctx, id)
	if !errors.Is(err, notify.ErrNotFound) || strings.Contains(id, "-") {
		return o, err
	}
	all, ferr := box.Store.Findings(ctx)
	if ferr != nil {
		return o, err
	}
	for _, f := range all { // newest first
		if strings.HasSuffix(f.ID, "-"+id) {
			return box.Load(ctx, f.ID)
		}
	}
	return o, fmt.Errorf("%w; a bisection prints its finding's ID when it ends, and 'pgbisect status' lists bisection IDs, which name their finding too", err)
}
