package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/config"
	"github.com/pgbisect/pgbisect/store"
)

// openResults opens the application of cfg and returns its results store
// (its db, else the private cluster under the state directory, started if
// need be) and the function that lets go of it.
func openResults(ctx context.Context, env *Env, cfg *config.Config) (*store.Store, func(), error) {
	a, err := app.Open(ctx, appOptions(cfg, env.Log), nil)
	if err != nil {
		return nil, nil, err
	}
	st, err := a.Store(ctx)
	if err != nil {
		return nil, nil, err
	}
	return st, a.Close, nil
}

// openOutbox opens the application of cfg and returns the outbox of its
// results store, and the function that lets go of the store.
func openOutbox(ctx context.Context, env *Env, cfg *config.Config) (*store.Store, func(), error) {
	a, err := app.Open(ctx, appOptions(cfg, env.Log), nil)
	if err != nil {
		return nil, nil, err
	}
	box, err := a.Outbox(ctx, progress(env.Stderr))
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return box, a.Close, nil
}

// loadFinding loads finding id from box. The ID of a bisection (as
// status lists it) names the bisection's latest finding.
func loadFinding(ctx context.Context, box *store.Store, id string) (finding.Outgoing, error) {
	o, err := box.LoadFinding(ctx, id)
	if !errors.Is(err, finding.ErrNotFound) || strings.Contains(id, "-") {
		return o, err
	}
	all, ferr := box.Findings(ctx)
	if ferr != nil {
		return o, err
	}
	for _, f := range all { // newest first
		if strings.HasSuffix(f.ID, "-"+id) {
			return box.LoadFinding(ctx, f.ID)
		}
	}
	return o, fmt.Errorf("%w; a bisection prints its finding's ID when it ends, and 'pgbisect status' lists bisection IDs, which name their finding too", err)
}
