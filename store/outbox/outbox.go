// Package outbox keeps notify's findings in the results store: DB
// implements notify.Outbox on a *store.Store, so findings and the posts made
// for them live next to the measurements behind them, and several machines
// sharing one store drain one outbox.
//
// It is a package of its own so that store keeps findings as opaque JSON
// and imports nothing of notify, and notify knows nothing of PostgreSQL.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

// DB is a notify.Outbox in the results store.
type DB struct {
	Store *store.Store
}

// New returns the outbox of s.
func New(s *store.Store) *DB { return &DB{Store: s} }

var _ notify.Outbox = (*DB)(nil)

// Add records f, replacing an earlier record with the same ID; posts
// already made for it are kept.
func (d *DB) Add(ctx context.Context, f *notify.Finding) error {
	if err := f.Validate(); err != nil {
		return err
	}
	data, err := notify.Marshal(f)
	if err != nil {
		return err
	}
	return d.Store.SaveFinding(ctx, summary(f, data))
}

// summary is the store's row for f: the finding itself as JSON and the
// columns people query (culprits, the main comparison).
func summary(f *notify.Finding, data []byte) store.Finding {
	sf := store.Finding{
		ID: f.ID, Kind: string(f.Kind), Branch: f.Branch, Scenario: f.Scenario, Point: f.Point, Metric: f.Metric,
		Report: data, Time: f.Started,
	}
	for _, c := range f.Culprits {
		sf.Culprits = append(sf.Culprits, c.Commit.Hash)
	}
	var main *notify.Comparison
	switch {
	case len(f.Culprits) > 0 && len(f.Culprits[0].Comparisons) > 0:
		main = &f.Culprits[0].Comparisons[0]
	default:
		for i := range f.Comparisons {
			c := &f.Comparisons[i]
			if c.Metric == f.Metric && c.Point == f.Point {
				main = c
				break
			}
		}
	}
	if main != nil {
		sf.Ratio, sf.RatioLow, sf.RatioHigh, sf.P = main.Ratio, main.RatioLow, main.RatioHigh, main.P
		sf.N = min(main.Good.N, main.Bad.N)
	}
	return sf
}

// Load returns finding id and its posts.
func (d *DB) Load(ctx context.Context, id string) (notify.Outgoing, error) {
	sf, err := d.Store.Finding(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return notify.Outgoing{}, fmt.Errorf("finding %s in the results store: %w", id, notify.ErrNotFound)
	}
	if err != nil {
		return notify.Outgoing{}, err
	}
	return outgoing(sf)
}

// Pending implements notify.Outbox. A finding whose every target has a
// post is settled on the way, so later calls do not read it again.
func (d *DB) Pending(ctx context.Context) ([]notify.Outgoing, error) {
	sfs, err := d.Store.PendingFindings(ctx)
	if err != nil {
		return nil, err
	}
	var out []notify.Outgoing
	for _, sf := range sfs {
		o, err := outgoing(sf)
		if err != nil {
			return nil, err
		}
		if len(notify.Remaining(o.Finding, o.Posts)) == 0 {
			if err := d.Store.SettleFinding(ctx, sf.ID); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

// MarkPosted implements notify.Outbox.
func (d *DB) MarkPosted(ctx context.Context, id string, p notify.Post) error {
	return d.Store.MarkPosted(ctx, id, store.Post{
		Target: p.Key, Action: p.Action, Repo: p.Repo, Issue: p.Issue, CommentID: p.CommentID, URL: p.URL,
		Note: p.Note, Time: p.At,
	})
}

// Lock takes the store-wide posting lock, so two posters (on this machine
// or another sharing the store) never post at once. It waits until ctx is
// done.
func (d *DB) Lock(ctx context.Context) (unlock func(), err error) {
	return d.Store.Lock(ctx, "post")
}

func outgoing(sf store.Finding) (notify.Outgoing, error) {
	f, err := notify.Unmarshal(sf.Report)
	if err != nil {
		return notify.Outgoing{}, fmt.Errorf("finding %s in the results store: %w", sf.ID, err)
	}
	o := notify.Outgoing{Finding: f}
	for _, p := range sf.Posts {
		o.Posts = append(o.Posts, notify.Post{
			Key: p.Target, Action: p.Action, Issue: p.Issue, CommentID: p.CommentID, URL: p.URL, Repo: p.Repo,
			At: p.Time, Note: p.Note,
		})
	}
	return o, nil
}

// Import moves the findings of a file outbox, where pgbisect kept them
// before it had the results store (STATE/findings), into d with the posts
// made for them, then renames the directory to <dir>.imported so it runs
// once. It returns how many findings it moved; a missing directory is
// nothing to do.
func (d *DB) Import(ctx context.Context, files *notify.Dir) (int, error) {
	paths, err := filepath.Glob(filepath.Join(files.Path, "*.json"))
	if err != nil || len(paths) == 0 {
		return 0, err
	}
	n := 0
	for _, p := range paths {
		id := strings.TrimSuffix(filepath.Base(p), ".json")
		if strings.HasSuffix(id, ".posts") {
			continue
		}
		o, err := files.Load(ctx, id)
		if err != nil {
			return n, fmt.Errorf("importing %s: %w", p, err)
		}
		if err := d.Add(ctx, o.Finding); err != nil {
			return n, fmt.Errorf("importing %s: %w", p, err)
		}
		for _, pst := range o.Posts {
			if err := d.MarkPosted(ctx, id, pst); err != nil {
				return n, fmt.Errorf("importing the posts of %s: %w", p, err)
			}
		}
		n++
	}
	if err := os.Rename(files.Path, files.Path+".imported"); err != nil {
		return n, fmt.Errorf("imported %d findings from %s but could not rename it: %w", n, files.Path, err)
	}
	return n, nil
}
