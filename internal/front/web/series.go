package web

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/pgbisect/pgbisect/bench/stats/changepoint"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// SeriesData is one nightly series as the chart draws it and /api/series
// returns it. Field names are stable.
type SeriesData struct {
	Branch string `json:"branch,omitempty"`
	// Class is the machine class whose nightly runs these are; "" (left
	// out) is the default class.
	Class    string `json:"class,omitempty"`
	Scenario string `json:"scenario"`
	Metric   string `json:"metric"`
	Point    string `json:"point"`
	// Nights are oldest first.
	Nights []Night `json:"nights"`
	// ChangePoints are the shifts change point detection (Otava's
	// defaults) finds in the nightly medians.
	ChangePoints []SeriesChange `json:"change_points"`
	// Culprits are the findings made on this series, at the night whose
	// comparison led to them.
	Culprits []SeriesCulprit `json:"culprits"`
}

// Night is one nightly result of a series.
type Night struct {
	NightlyID int64  `json:"nightly_id"`
	Commit    string `json:"commit"`
	// Time is when the nightly run started, in Unix seconds.
	Time   int64   `json:"time"`
	N      int     `json:"n"`
	Median float64 `json:"median"`
	// Q1 and Q3 are the quartiles, Min and Max the extremes of the night's
	// samples; Spread is (Q3-Q1)/Median, a fraction.
	Q1     float64 `json:"q1"`
	Q3     float64 `json:"q3"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Spread float64 `json:"spread"`
}

// SeriesChange is a change point: Index is the first night of the new level.
type SeriesChange struct {
	Index     int     `json:"index"`
	RelChange float64 `json:"rel_change"`
	P         float64 `json:"p"`
}

// SeriesCulprit is a finding marked on a series.
type SeriesCulprit struct {
	Index     int      `json:"index"`
	FindingID string   `json:"finding_id"`
	Kind      string   `json:"kind"`
	Culprits  []string `json:"culprits"`
}

// quantile is the linear-interpolation quantile of sorted xs.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	pos := q * float64(len(xs)-1)
	i := int(pos)
	if i+1 >= len(xs) {
		return xs[len(xs)-1]
	}
	return xs[i] + (pos-float64(i))*(xs[i+1]-xs[i])
}

// seriesData reads one series and marks its change points and findings. A
// series no nightly pass measured yet has no nights (and findings made by
// bisections on it at index -1).
func (s *Server) seriesData(ctx context.Context, class, scenario, metric, point string) (*SeriesData, error) {
	if class == "default" {
		class = "" // as the store keeps it
	}
	pts, err := s.st.ClassSeries(ctx, class, s.cfg.Branch, scenario, metric, point)
	if err != nil {
		return nil, err
	}
	d := &SeriesData{Branch: s.cfg.Branch, Class: class, Scenario: scenario, Metric: metric, Point: point,
		Nights: []Night{}, ChangePoints: []SeriesChange{}, Culprits: []SeriesCulprit{}}
	medians := make([]float64, len(pts))
	byCommit := map[string]int{}
	for i, p := range pts {
		xs := slices.Sorted(slices.Values(p.Values))
		n := Night{NightlyID: p.NightlyID, Commit: p.Commit, Time: p.Time.Unix(), N: len(xs),
			Median: quantile(xs, 0.5), Q1: quantile(xs, 0.25), Q3: quantile(xs, 0.75)}
		if len(xs) > 0 {
			n.Min, n.Max = xs[0], xs[len(xs)-1]
		}
		if n.Median != 0 {
			n.Spread = (n.Q3 - n.Q1) / n.Median
		}
		d.Nights = append(d.Nights, n)
		medians[i] = n.Median
		byCommit[p.Commit] = i
	}
	for _, cp := range changepoint.Detect(medians, changepoint.DefaultOptions) {
		d.ChangePoints = append(d.ChangePoints, SeriesChange{Index: cp.Index, RelChange: cp.RelChange, P: cp.P})
	}
	fs, err := s.st.Findings(ctx)
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.Scenario != scenario || f.Metric != metric || f.Point != point || len(f.Culprits) == 0 {
			continue
		}
		if f.Branch != "" && s.cfg.Branch != "" && f.Branch != s.cfg.Branch {
			continue
		}
		// The night whose commit was the finding's bad end; failing that,
		// the first night after the finding was made.
		idx := -1
		if nf, err := finding.Unmarshal(f.Report); err == nil {
			if i, ok := byCommit[nf.Bad.Hash]; ok {
				idx = i
			}
		}
		if idx < 0 && len(d.Nights) > 0 {
			idx, _ = slices.BinarySearchFunc(d.Nights, f.Time.Unix(), func(n Night, t int64) int { return int(n.Time - t) })
			idx = min(idx, len(d.Nights)-1)
		}
		d.Culprits = append(d.Culprits, SeriesCulprit{Index: idx, FindingID: f.ID, Kind: f.Kind, Culprits: f.Culprits})
	}
	return d, nil
}

// series lists the series, or shows one when scenario and metric are given.
func (s *Server) series(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	q := r.URL.Query()
	if q.Get("scenario") == "" && q.Get("metric") == "" {
		keys, err := s.st.SeriesKeys(ctx, s.cfg.Branch)
		if err != nil {
			s.fail(w, r, http.StatusInternalServerError, err)
			return
		}
		s.render(w, r, http.StatusOK, "serieslist", "Nightly series", keys)
		return
	}
	d, err := s.seriesData(ctx, q.Get("class"), q.Get("scenario"), q.Get("metric"), q.Get("point"))
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	title := fmt.Sprintf("%s %s %s", d.Scenario, d.Point, d.Metric)
	if d.Class != "" {
		title += " on " + d.Class
	}
	s.render(w, r, http.StatusOK, "series", title, d)
}

// seriesJSON is /api/series?scenario=&metric=&point=[&class=].
func (s *Server) seriesJSON(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	q := r.URL.Query()
	for _, k := range []string{"scenario", "metric"} {
		if q.Get(k) == "" {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("query parameter %q is required", k))
			return
		}
	}
	d, err := s.seriesData(ctx, q.Get("class"), q.Get("scenario"), q.Get("metric"), q.Get("point"))
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if len(d.Nights) == 0 {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no nightly series %q %q at point %q of machine class %q (/series lists those there are)",
			d.Scenario, d.Metric, d.Point, firstOf(d.Class, "default")))
		return
	}
	s.writeJSON(w, d)
}

func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
