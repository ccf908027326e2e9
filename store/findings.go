package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Finding is something the bot found: a culprit commit with its effect, an
// improvement, or a build failure of the branch.
type Finding struct {
	ID int64
	// Key identifies the finding so that saving it again keeps one row.
	// Empty means Kind|Culprit|Scenario|Point|Metric.
	Key string
	// Kind is "regression" (the default), "improvement" or "build-failure".
	Kind        string
	BisectionID string
	// Culprit is the full hash of the culprit commit (or "A..B" for a
	// range bordered by skipped commits).
	Culprit  string
	Scenario string
	Point    string
	Metric   string
	// Effect is the relative change (0.104 for +10.4%), CILow and CIHigh
	// its confidence interval, P the p-value and N the samples per side.
	Effect, CILow, CIHigh, P float64
	N                        int
	// Title is the issue title the report is posted under.
	Title string
	// Report is the rendered report as package notify defines it (opaque).
	Report json.RawMessage
	Time   time.Time
}

func (f *Finding) key() string {
	if f.Key != "" {
		return f.Key
	}
	return strings.Join([]string{f.Kind, f.Culprit, f.Scenario, f.Point, f.Metric}, "|")
}

// SaveFinding stores f, or updates the finding with the same key, and
// returns its id. A finding stays pending until MarkPosted records a post.
func (s *Store) SaveFinding(ctx context.Context, f Finding) (int64, error) {
	if f.Title == "" {
		return 0, errors.New("saving finding: a title is required")
	}
	if f.Kind == "" {
		f.Kind = "regression"
	}
	var id int64
	err := s.db.QueryRow(ctx, `
		INSERT INTO findings (key, kind, bisection_id, culprit, scenario, point, metric, effect, ci_low, ci_high, p, n,
			title, report, created_at)
		VALUES ($1, $2, nullif($3, ''), $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT (key) DO UPDATE SET kind = EXCLUDED.kind, bisection_id = EXCLUDED.bisection_id,
			culprit = EXCLUDED.culprit, scenario = EXCLUDED.scenario, point = EXCLUDED.point, metric = EXCLUDED.metric,
			effect = EXCLUDED.effect, ci_low = EXCLUDED.ci_low, ci_high = EXCLUDED.ci_high, p = EXCLUDED.p, n = EXCLUDED.n,
			title = EXCLUDED.title, report = EXCLUDED.report
		RETURNING id`,
		f.key(), f.Kind, f.BisectionID, f.Culprit, f.Scenario, f.Point, f.Metric, f.Effect, f.CILow, f.CIHigh, f.P, f.N,
		f.Title, jsonOr(f.Report, "{}"), timeOr(f.Time)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("saving finding %q: %w", f.Title, err)
	}
	return id, nil
}

const findingColumns = `id, key, kind, coalesce(bisection_id, ''), culprit, scenario, point, metric,
	effect, ci_low, ci_high, p, n, title, report, created_at`

// PendingFindings returns the findings not posted yet, oldest first: the
// outbox the notify step drains, so a finding that could not be posted
// (GitHub down, no token) is posted on a later run.
func (s *Store) PendingFindings(ctx context.Context) ([]Finding, error) {
	return s.findings(ctx, `SELECT `+findingColumns+` FROM findings f
		WHERE NOT EXISTS (SELECT FROM posts p WHERE p.finding_id = f.id) ORDER BY created_at, id`)
}

// Findings returns every finding, newest first.
func (s *Store) Findings(ctx context.Context) ([]Finding, error) {
	return s.findings(ctx, `SELECT `+findingColumns+` FROM findings ORDER BY created_at DESC, id DESC`)
}

func (s *Store) findings(ctx context.Context, sql string, args ...any) ([]Finding, error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("reading findings: %w", err)
	}
	defer rows.Close()
	var out []Finding
	for rows.Next() {
		var f Finding
		if err := rows.Scan(&f.ID, &f.Key, &f.Kind, &f.BisectionID, &f.Culprit, &f.Scenario, &f.Point, &f.Metric,
			&f.Effect, &f.CILow, &f.CIHigh, &f.P, &f.N, &f.Title, &f.Report, &f.Time); err != nil {
			return nil, fmt.Errorf("reading findings: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// Post records where a finding was posted.
type Post struct {
	ID        int64
	FindingID int64
	// Repo is owner/name.
	Repo  string
	Issue int
	// CommentID is the comment's id when the finding was added to an
	// existing issue; 0 when it opened the issue.
	CommentID int64
	URL       string
	Time      time.Time
}

// MarkPosted records that finding id was posted as p; the finding is no
// longer pending.
func (s *Store) MarkPosted(ctx context.Context, id int64, p Post) error {
	if p.Repo == "" || p.Issue <= 0 {
		return fmt.Errorf("marking finding %d posted: repo and issue number are required", id)
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO posts (finding_id, repo, issue_number, comment_id, url, posted_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		id, p.Repo, p.Issue, p.CommentID, p.URL, timeOr(p.Time))
	if err != nil {
		return fmt.Errorf("marking finding %d posted: %w", id, err)
	}
	return nil
}

// Posts returns the posts of finding id, oldest first.
func (s *Store) Posts(ctx context.Context, id int64) ([]Post, error) {
	rows, err := s.db.Query(ctx, `
		SELECT id, finding_id, repo, issue_number, comment_id, url, posted_at FROM posts
		WHERE finding_id = $1 ORDER BY posted_at, id`, id)
	if err != nil {
		return nil, fmt.Errorf("reading posts of finding %d: %w", id, err)
	}
	defer rows.Close()
	var out []Post
	for rows.Next() {
		var p Post
		if err := rows.Scan(&p.ID, &p.FindingID, &p.Repo, &p.Issue, &p.CommentID, &p.URL, &p.Time); err != nil {
			return nil, fmt.Errorf("reading posts of finding %d: %w", id, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
