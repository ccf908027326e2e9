package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/pgbisect/pgbisect/store"
)

// The read-only listings of the JSON API: /api/bisections and
// /api/findings, newest first, a page at a time. A page's "next" is the
// query of the page after it (absent on the last page), so a client
// follows it without knowing how the cursor is made.

// Paging limits of the listings.
const (
	defaultPage = 50
	maxPage     = 500
)

// pageParams reads ?limit= and ?after= of a listing.
func pageParams(r *http.Request) (limit int, after string, err error) {
	q := r.URL.Query()
	limit, after = defaultPage, q.Get("after")
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPage {
			return 0, "", badParam{fmt.Errorf("limit=%q: want a number of items from 1 to %d (default %d)", v, maxPage, defaultPage)}
		}
		limit = n
	}
	return limit, after, nil
}

// nextPage is the query of the page after one of n items ending at last.
func nextPage(path string, limit, n int, last string) string {
	if n < limit {
		return ""
	}
	return path + "?" + url.Values{"limit": {strconv.Itoa(limit)}, "after": {last}}.Encode()
}

// bisectionItem is one bisection of /api/bisections.
type bisectionItem struct {
	ID string `json:"id"`
	// Status is the phase the store saved: endpoints, search, check, done.
	Status   string    `json:"status"`
	Outcome  string    `json:"outcome,omitempty"`
	Scenario string    `json:"scenario"`
	Metric   string    `json:"metric"`
	Point    string    `json:"point,omitempty"`
	Good     string    `json:"good"`
	Bad      string    `json:"bad"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
	// URL is its whole saved state (/api/bisections/ID).
	URL string `json:"url"`
}

// bisectionsJSON is /api/bisections?limit=&after=.
func (s *Server) bisectionsJSON(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, "/api/bisections", "bisections", s.st.BisectionsPage,
		func(b store.BisectionSummary) string { return b.ID },
		func(b store.BisectionSummary) bisectionItem {
			return bisectionItem{ID: b.ID, Status: b.Status, Outcome: b.Outcome,
				Scenario: scenarioName(b.Scenario), Metric: b.Metric, Point: b.Point, Good: b.Good, Bad: b.Bad,
				Created: b.Created, Updated: b.Updated, URL: "/api/bisections/" + url.PathEscape(b.ID)}
		})
}

// servePage answers one page of a listing at path: the rows load returns
// after the cursor, each written as item(row) in the array named key,
// and the query of the next page (named by the last row's id) unless
// this page is the last.
func servePage[T, I any](s *Server, w http.ResponseWriter, r *http.Request, path, key string,
	load func(ctx context.Context, limit int, after string) ([]T, error), id func(T) string, item func(T) I) {
	limit, after, err := pageParams(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	rows, err := load(ctx, limit, after)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, afterErr(err, after))
		return
	}
	items := make([]I, 0, len(rows))
	for _, row := range rows {
		items = append(items, item(row))
	}
	out := map[string]any{key: items}
	if n := len(rows); n > 0 {
		if next := nextPage(path, limit, n, id(rows[n-1])); next != "" {
			out["next"] = next
		}
	}
	s.writeJSON(w, out)
}

// findingItem is one finding of /api/findings.
type findingItem struct {
	ID          string   `json:"id"`
	Kind        string   `json:"kind"`
	Branch      string   `json:"branch,omitempty"`
	BisectionID string   `json:"bisection_id,omitempty"`
	Scenario    string   `json:"scenario"`
	Metric      string   `json:"metric"`
	Point       string   `json:"point,omitempty"`
	Culprits    []string `json:"culprits"`
	// Ratio is median(bad)/median(good) of the first culprit, RatioLow
	// and RatioHigh its confidence interval, P its p-value, N the samples
	// per side (0 when the finding has no comparison).
	Ratio     float64   `json:"ratio"`
	RatioLow  float64   `json:"ratio_low"`
	RatioHigh float64   `json:"ratio_high"`
	P         float64   `json:"p"`
	N         int       `json:"n"`
	Created   time.Time `json:"created"`
	// Issues are the GitHub issues and comments it was posted to.
	Issues []string `json:"issues"`
	// URL is its page, the report as posted.
	URL string `json:"url"`
}

// findingsJSON is /api/findings?limit=&after=.
func (s *Server) findingsJSON(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, "/api/findings", "findings", s.st.FindingsPage,
		func(f store.Finding) string { return f.ID },
		func(f store.Finding) findingItem {
			it := findingItem{ID: f.ID, Kind: f.Kind, Branch: f.Branch, BisectionID: f.BisectionID, Scenario: f.Scenario,
				Metric: f.Metric, Point: f.Point, Culprits: f.Culprits, Ratio: f.Ratio, RatioLow: f.RatioLow, RatioHigh: f.RatioHigh,
				P: f.P, N: f.N, Created: f.Time, Issues: []string{}, URL: "/findings/" + url.PathEscape(f.ID)}
			if it.Culprits == nil {
				it.Culprits = []string{}
			}
			for _, p := range f.Posts {
				if p.URL != "" {
					it.Issues = append(it.Issues, p.URL)
				}
			}
			return it
		})
}

// afterErr makes an unknown ?after= a 400: the client sent a cursor that
// names nothing.
func afterErr(err error, after string) error {
	if after != "" && errors.Is(err, store.ErrNotFound) {
		return badParam{fmt.Errorf("after=%q: %w (use the \"next\" of the page before, or leave after out for the newest)", after, err)}
	}
	return err
}
