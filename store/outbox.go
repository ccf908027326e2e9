package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// The results store is the outbox of findings (notify.Outbox, notify.Adder):
// a finding is recorded with Add when it is made and stays pending until
// every one of its targets (finding.TargetKeys) has a post recorded with
// MarkPosted, so nothing is lost or posted twice, and several machines
// sharing the store drain one outbox. Lock(ctx, PostLock) keeps two posters
// apart.

// PostLock is the name of the lock (Lock) a poster holds while it posts.
const PostLock = "post"

// Add records f, replacing an earlier record with the same ID; posts
// already made for it are kept.
func (s *Store) Add(ctx context.Context, f *finding.Finding) error {
	if err := f.Validate(); err != nil {
		return err
	}
	data, err := finding.Marshal(f)
	if err != nil {
		return err
	}
	return s.SaveFinding(ctx, summary(f, data))
}

// summary is the store's row for f: the finding itself as JSON and the
// columns people query (culprits, the main comparison).
func summary(f *finding.Finding, data []byte) Finding {
	sf := Finding{
		ID: f.ID, Kind: string(f.Kind), Branch: f.Branch, Scenario: f.Scenario, Point: f.Point, Metric: f.Metric,
		Report: data, Time: f.Started,
	}
	for _, c := range f.Culprits {
		sf.Culprits = append(sf.Culprits, c.Commit.Hash)
	}
	var main *finding.Comparison
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

// LoadFinding returns finding id with its posts, or an error wrapping
// finding.ErrNotFound.
func (s *Store) LoadFinding(ctx context.Context, id string) (finding.Outgoing, error) {
	sf, err := s.Finding(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return finding.Outgoing{}, fmt.Errorf("finding %s in the results store: %w", id, finding.ErrNotFound)
	}
	if err != nil {
		return finding.Outgoing{}, err
	}
	return outgoing(sf)
}

// Pending returns the findings with a target not posted yet, oldest first,
// each with the posts already made. A finding whose every target has a post
// is settled on the way, so later calls do not read it again.
func (s *Store) Pending(ctx context.Context) ([]finding.Outgoing, error) {
	sfs, err := s.PendingFindings(ctx)
	if err != nil {
		return nil, err
	}
	var out []finding.Outgoing
	for _, sf := range sfs {
		o, err := outgoing(sf)
		if err != nil {
			return nil, err
		}
		if len(finding.Unposted(o.Finding, o.Posts)) == 0 {
			if err := s.SettleFinding(ctx, sf.ID); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

func outgoing(sf Finding) (finding.Outgoing, error) {
	f, err := finding.Unmarshal(sf.Report)
	if err != nil {
		return finding.Outgoing{}, fmt.Errorf("finding %s in the results store: %w", sf.ID, err)
	}
	return finding.Outgoing{Finding: f, Posts: sf.Posts}, nil
}

// AddFile keeps file name of finding id's report (notify.FileAdder): a
// flame graph the dashboard serves beside the report.
func (s *Store) AddFile(ctx context.Context, id, name string, data []byte) error {
	return s.SaveFindingFile(ctx, id, name, data)
}
