package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Comparison is a verdict on two builds for one scenario, point and metric,
// with the numbers behind it.
type Comparison struct {
	ID       int64
	Scenario string
	Point    string
	Metric   string
	BaseKey  string
	HeadKey  string
	// Verdict is the stats package's outcome, e.g. "different", "same",
	// "inconclusive".
	Verdict string
	// Ratio is median(head)/median(base) (1.104 = +10.4%); RatioLow and
	// RatioHigh are its confidence interval; P is the test's p-value.
	Ratio, RatioLow, RatioHigh, P float64
	NBase, NHead                  int
	// Detail is the full result as the stats package renders it (opaque).
	Detail      json.RawMessage
	BisectionID string
	NightlyID   int64
	Time        time.Time
}

// RecordComparison stores c and returns its id.
func (s *Store) RecordComparison(ctx context.Context, c Comparison) (int64, error) {
	if c.BaseKey == "" || c.HeadKey == "" || c.Scenario == "" || c.Metric == "" || c.Verdict == "" {
		return 0, fmt.Errorf("recording comparison: base and head keys, scenario, metric and verdict are required")
	}
	var id int64
	err := s.db.QueryRow(ctx, `
		INSERT INTO comparisons (scenario, point, metric, base_key, head_key, verdict, ratio, ratio_low, ratio_high, p,
			n_base, n_head, detail, bisection_id, nightly_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, nullif($14, ''), nullif($15, 0::int8), $16)
		RETURNING id`,
		c.Scenario, c.Point, c.Metric, c.BaseKey, c.HeadKey, c.Verdict, c.Ratio, c.RatioLow, c.RatioHigh, c.P,
		c.NBase, c.NHead, jsonOr(c.Detail, "{}"), c.BisectionID, c.NightlyID, timeOr(c.Time)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("recording comparison of %s and %s: %w", c.BaseKey, c.HeadKey, err)
	}
	return id, nil
}

// Comparisons returns the comparisons of base and head, oldest first.
func (s *Store) Comparisons(ctx context.Context, baseKey, headKey string) ([]Comparison, error) {
	rows, err := s.db.Query(ctx, `
		SELECT id, scenario, point, metric, base_key, head_key, verdict, ratio, ratio_low, ratio_high, p, n_base, n_head,
			detail, coalesce(bisection_id, ''), coalesce(nightly_id, 0), created_at
		FROM comparisons WHERE base_key = $1 AND head_key = $2 ORDER BY created_at, id`, baseKey, headKey)
	if err != nil {
		return nil, fmt.Errorf("reading comparisons: %w", err)
	}
	defer rows.Close()
	var out []Comparison
	for rows.Next() {
		var c Comparison
		if err := rows.Scan(&c.ID, &c.Scenario, &c.Point, &c.Metric, &c.BaseKey, &c.HeadKey, &c.Verdict, &c.Ratio,
			&c.RatioLow, &c.RatioHigh, &c.P, &c.NBase, &c.NHead, &c.Detail, &c.BisectionID, &c.NightlyID, &c.Time); err != nil {
			return nil, fmt.Errorf("reading comparisons: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
