// Package bisections keeps bisect's resumable state in the results store:
// DB is the bisect.Saver, with the Load that --resume needs, that writes
// each bisection to the store's bisections table (the store-backed twin of
// bisect.FileSaver). A bisection interrupted on one machine can be resumed
// on any machine sharing the store.
//
// It is a package of its own so that store keeps the state as opaque JSON
// and imports nothing of bisect.
package bisections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/store"
)

// DB saves and loads bisections in a results store.
type DB struct {
	Store *store.Store
	// Files, when set, is where pgbisect before the results store kept
	// bisections (STATE/bisections/ID.json). Load falls back to it and
	// moves what it finds into the store, so an old bisection still
	// resumes.
	Files *bisect.FileSaver
}

// New returns the bisections of s.
func New(s *store.Store) *DB { return &DB{Store: s} }

var _ bisect.Saver = (*DB)(nil)

// Save implements bisect.Saver: it replaces the stored state of s.ID in one
// statement, so a crash leaves the previous state or the new one. The
// row's status is the bisection's phase ("endpoints", "search", "check",
// "done").
func (d *DB) Save(ctx context.Context, s *bisect.State) error {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding bisection state: %w", err)
	}
	return d.Store.SaveBisection(ctx, s.ID, data, string(s.Phase))
}

// Load returns the saved state of bisection id, or an error wrapping
// bisect.ErrNotFound.
func (d *DB) Load(ctx context.Context, id string) (*bisect.State, error) {
	data, _, err := d.Store.LoadBisection(ctx, id)
	if errors.Is(err, store.ErrNotFound) && d.Files != nil {
		st, ferr := d.Files.Load(ctx, id)
		if ferr == nil {
			return st, d.Save(ctx, st)
		}
		if !errors.Is(ferr, bisect.ErrNotFound) {
			return nil, ferr
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s (looked in the results store; 'pgbisect status' lists them)", bisect.ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return bisect.Decode(data)
}
