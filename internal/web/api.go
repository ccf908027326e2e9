package web

import (
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
	limit, after, err := pageParams(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	bs, err := s.st.BisectionsPage(ctx, limit, after)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, afterErr(err, after))
		return
	}
	out := struct {
		Bisections []bisectionItem `json:"bisections"`
		Next       string          `json:"next,omitempty"`
	}{Bisections: []bisectionItem{}}
	for _, b := range bs {
		out.Bisections = append(out.Bisections, bisectionItem{ID: b.ID, Status: b.Status, Outcome: b.Outcome,
			Scenario: scenarioName(b.Scenario), Metric: b.Metric, Point: b.Point, Good: b.Good, Bad: b.Bad,
			Created: b.Created, Updated: b.Updated, URL: "/api/bisections/" + url.PathEscape(b.ID)})
	}
	if n := len(bs); n > 0 {
		out.Next = nextPage("/api/bisections", limit, n, bs[n-1].ID)
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
	limit, after, err := pageParams(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	fs, err := s.st.FindingsPage(ctx, limit, after)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, afterErr(err, after))
		return
	}
	out := struct {
		Findings []findingItem `json:"findings"`
		Next     string        `json:"next,omitempty"`
	}{Findings: []findingItem{}}
	for _, f := range fs {
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
		out.Findings = append(out.Findings, it)
	}
	if n := len(fs); n > 0 {
		out.Next = nextPage("/api/findings", limit, n, fs[n-1].ID)
	}
	s.writeJSON(w, out)
}

// afterErr makes an unknown ?after= a 400: the client sent a cursor that
// names nothing.
func afterErr(err error, after string) error {
	if after != "" && errors.Is(err, store.ErrNotFound) {
		return badParam{fmt.Errorf("after=%q: %w (use the \"next\" of the page before, or leave after out for the newest)", after, err)}
	}
	return err
}
