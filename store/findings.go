package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// Finding is something the bot found (a culprit, an improvement, a build
// failure), as the results store keeps it: the whole finding as
// finding.Marshal writes it in Report, and a summary in columns for
// queries. The outbox (Add, Pending) fills it from a finding.Finding.
type Finding struct {
	// ID is the finding's name (finding.NewID), e.g.
	// "20260130T021500Z-copy-single-9f8377f7a2".
	ID string
	// Kind is the finding's kind: "regression", "improvement", "build-failure"...
	Kind        string
	Branch      string
	BisectionID string
	// Culprits are the full hashes of the blamed commits, largest effect
	// first.
	Culprits []string
	Scenario string
	Point    string
	Metric   string
	// Ratio is median(bad)/median(good) of the first culprit (1.104 =
	// +10.4%), RatioLow and RatioHigh its confidence interval, P the
	// p-value and N the samples per side.
	Ratio, RatioLow, RatioHigh, P float64
	N                             int
	// Report is the finding as finding.Marshal writes it.
	Report json.RawMessage
	// Time is when the finding was made; zero means now.
	Time time.Time
	// Settled is set once every target has been posted (SettleFinding);
	// read-only for SaveFinding.
	Settled bool
	// Posts are the posts made for the finding, oldest first; filled by
	// reads, ignored by SaveFinding.
	Posts []finding.Post
}

// SaveFinding stores f, replacing an earlier finding with the same ID; the
// posts already recorded for it are kept. A saved finding is pending until
// SettleFinding.
func (s *Store) SaveFinding(ctx context.Context, f Finding) error {
	if f.ID == "" || f.Kind == "" {
		return errors.New("saving finding: id and kind are required")
	}
	if len(f.Report) > 0 && !json.Valid(f.Report) {
		return fmt.Errorf("saving finding %s: report is not valid JSON", f.ID)
	}
	culprits := f.Culprits
	if culprits == nil {
		culprits = []string{}
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO findings (id, kind, branch, bisection_id, culprits, scenario, point, metric,
			ratio, ratio_low, ratio_high, p, n, report, created_at)
		VALUES ($1, $2, $3, nullif($4, ''), $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT (id) DO UPDATE SET kind = EXCLUDED.kind, branch = EXCLUDED.branch,
			bisection_id = EXCLUDED.bisection_id, culprits = EXCLUDED.culprits, scenario = EXCLUDED.scenario,
			point = EXCLUDED.point, metric = EXCLUDED.metric, ratio = EXCLUDED.ratio, ratio_low = EXCLUDED.ratio_low,
			ratio_high = EXCLUDED.ratio_high, p = EXCLUDED.p, n = EXCLUDED.n, report = EXCLUDED.report`,
		f.ID, f.Kind, f.Branch, f.BisectionID, culprits, f.Scenario, f.Point, f.Metric,
		f.Ratio, f.RatioLow, f.RatioHigh, f.P, f.N, jsonOr(f.Report, "{}"), timeOr(f.Time))
	if err != nil {
		return fmt.Errorf("saving finding %s: %w", f.ID, err)
	}
	return nil
}

const findingColumns = `id, kind, branch, coalesce(bisection_id, ''), culprits, scenario, point, metric,
	ratio, ratio_low, ratio_high, p, n, report, created_at, settled_at IS NOT NULL`

// Finding returns finding id with its posts, or an error wrapping
// ErrNotFound.
func (s *Store) Finding(ctx context.Context, id string) (Finding, error) {
	fs, err := s.findings(ctx, "SELECT "+findingColumns+" FROM findings WHERE id = $1", id)
	if err != nil {
		return Finding{}, err
	}
	if len(fs) == 0 {
		return Finding{}, fmt.Errorf("finding %s: %w", id, ErrNotFound)
	}
	return fs[0], nil
}

// PendingFindings returns the findings not settled yet, oldest first, each
// with the posts already made: the outbox the posting step drains, so a
// finding that could not be posted (GitHub down, no token) is posted on a
// later run and a half-posted one is finished without duplicates.
func (s *Store) PendingFindings(ctx context.Context) ([]Finding, error) {
	return s.findings(ctx, "SELECT "+findingColumns+" FROM findings WHERE settled_at IS NULL ORDER BY created_at, id")
}

// Findings returns every finding with its posts, newest first.
func (s *Store) Findings(ctx context.Context) ([]Finding, error) {
	return s.findings(ctx, "SELECT "+findingColumns+" FROM findings ORDER BY created_at DESC, id DESC")
}

func (s *Store) findings(ctx context.Context, sql string, args ...any) ([]Finding, error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("reading findings: %w", err)
	}
	var out []Finding
	for rows.Next() {
		var f Finding
		if err := rows.Scan(&f.ID, &f.Kind, &f.Branch, &f.BisectionID, &f.Culprits, &f.Scenario, &f.Point, &f.Metric,
			&f.Ratio, &f.RatioLow, &f.RatioHigh, &f.P, &f.N, &f.Report, &f.Time, &f.Settled); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading findings: %w", err)
		}
		out = append(out, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading findings: %w", err)
	}
	// One query for the posts of all of them.
	idx := make(map[string]int, len(out))
	ids := make([]string, len(out))
	for i, f := range out {
		idx[f.ID], ids[i] = i, f.ID
	}
	if len(ids) == 0 {
		return out, nil
	}
	prows, err := s.db.Query(ctx, `
		SELECT finding_id, target, action, repo, issue_number, comment_id, url, note, posted_at FROM posts
		WHERE finding_id = ANY($1) ORDER BY posted_at, id`, ids)
	if err != nil {
		return nil, fmt.Errorf("reading posts: %w", err)
	}
	defer prows.Close()
	for prows.Next() {
		var id string
		var p finding.Post
		if err := prows.Scan(&id, &p.Key, &p.Action, &p.Repo, &p.Issue, &p.CommentID, &p.URL, &p.Note, &p.At); err != nil {
			return nil, fmt.Errorf("reading posts: %w", err)
		}
		out[idx[id]].Posts = append(out[idx[id]].Posts, p)
	}
	return out, prows.Err()
}

// MarkPosted records one post made for finding id. It is durable when it
// returns (one committed statement), which is what lets the poster look a
// post up on GitHub only when its recording was interrupted.
func (s *Store) MarkPosted(ctx context.Context, id string, p finding.Post) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO posts (finding_id, target, action, repo, issue_number, comment_id, url, note, posted_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		id, p.Key, p.Action, p.Repo, p.Issue, p.CommentID, p.URL, p.Note, timeOr(p.At))
	if err != nil {
		return fmt.Errorf("recording a post of finding %s: %w", id, err)
	}
	return nil
}

// SettleFinding marks finding id as fully posted: PendingFindings no longer
// returns it. Saving it again does not unsettle it.
func (s *Store) SettleFinding(ctx context.Context, id string) error {
	tag, err := s.db.Exec(ctx, "UPDATE findings SET settled_at = coalesce(settled_at, now()) WHERE id = $1", id)
	if err != nil {
		return fmt.Errorf("settling finding %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("settling finding %s: %w", id, ErrNotFound)
	}
	return nil
}

// Lock takes a session-level advisory lock named name on a connection of
// its own, waiting for it until ctx is done, and returns the function that
// releases it. Processes sharing the store (on one machine or several) use
// it so that, for example, two posters never post the same finding at once.
func (s *Store) Lock(ctx context.Context, name string) (unlock func(), err error) {
	if s.pool == nil {
		return nil, errors.New("locking: a store bound to a transaction has no connections of its own")
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", "pgbisect:"+name); err != nil {
		conn.Release()
		return nil, fmt.Errorf("locking %s: %w", name, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", "pgbisect:"+name); err != nil {
			// Closing the connection ends the session and its locks.
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}, nil
}

// SaveFindingFile stores file name of finding id's report (a flame graph),
// replacing an earlier one of that name. The finding must be saved first.
func (s *Store) SaveFindingFile(ctx context.Context, id, name string, data []byte) error {
	if name == "" || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("saving a file of finding %s: %q is not a file name", id, name)
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO finding_files (finding_id, name, data) VALUES ($1, $2, $3)
		ON CONFLICT (finding_id, name) DO UPDATE SET data = EXCLUDED.data, created_at = now()`, id, name, data)
	if err != nil {
		return fmt.Errorf("saving file %s of finding %s: %w", name, id, err)
	}
	return nil
}

// FindingFile returns file name of finding id's report and when it was
// stored, or an error wrapping ErrNotFound.
func (s *Store) FindingFile(ctx context.Context, id, name string) ([]byte, time.Time, error) {
	var data []byte
	var at time.Time
	err := s.db.QueryRow(ctx, "SELECT data, created_at FROM finding_files WHERE finding_id = $1 AND name = $2", id, name).Scan(&data, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, time.Time{}, fmt.Errorf("finding %s has no file %q in the results store: %w", id, name, ErrNotFound)
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("reading file %s of finding %s: %w", name, id, err)
	}
	return data, at, nil
}

// FindingFiles lists the names of the files stored for finding id.
func (s *Store) FindingFiles(ctx context.Context, id string) ([]string, error) {
	rows, err := s.db.Query(ctx, "SELECT name FROM finding_files WHERE finding_id = $1 ORDER BY name", id)
	if err != nil {
		return nil, fmt.Errorf("listing the files of finding %s: %w", id, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing the files of finding %s: %w", id, err)
	}
	return names, nil
}
