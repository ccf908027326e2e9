package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/internal/jobs"
	"github.com/pgbisect/pgbisect/store"
)

// page is what every template gets: the page's own data under Data.
type page struct {
	Title string
	Data  any
	// SignedIn is whether the browser has a session; Writes whether this
	// dashboard takes requests (for the header's links).
	SignedIn, Writes bool
}

// render writes page name with data; a template error becomes a 500 before
// anything is written.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "layout", page{Title: title, Data: data,
		SignedIn: s.signedIn(r), Writes: s.writesOff() == nil}); err != nil {
		s.log.Error("rendering a page", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
}

// fragment writes template block of page name alone, for live updates.
func (s *Server) fragment(w http.ResponseWriter, r *http.Request, name, block string, data any) {
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, block, page{Data: data}); err != nil {
		s.log.Error("rendering a fragment", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
}

// writeJSON writes v as JSON.
func (s *Server) writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data) //nolint:errcheck // the client went away
}

// fail writes an error page: 404 for what does not exist, the status given
// otherwise. Server-side failures are logged; the page says what failed.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, bisect.ErrNotFound) {
		status = http.StatusNotFound
	}
	if status >= 500 {
		s.log.Error("serving a page", "path", r.URL.Path, "err", err)
	}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()}) //nolint:errcheck // the client went away
		return
	}
	s.render(w, r, status, "error", http.StatusText(status), struct {
		Status int
		Text   string
		Err    string
	}{status, http.StatusText(status), err.Error()})
}

// ctx bounds a page's reads.
func (s *Server) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.cfg.QueryTimeout)
}

func (s *Server) funcs() template.FuncMap {
	return template.FuncMap{
		"short": short,
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "–"
			}
			return t.UTC().Format("2006-01-02 15:04 UTC")
		},
		"eventsOf": jobs.EventsOf,
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return "–"
			}
			return time.Since(t).Round(time.Second).String() + " ago"
		},
		"num":    num,
		"unix":   func(sec int64) time.Time { return time.Unix(sec, 0) },
		"mul100": func(f float64) float64 { return f * 100 },
		"pct":    func(f float64) string { return fmt.Sprintf("%+.1f%%", (f-1)*100) },
		"commitURL": func(hash string) string {
			if s.cfg.CommitURL == "" {
				return "/commits/" + url.PathEscape(hash)
			}
			return s.cfg.CommitURL + hash
		},
		// seriesURL links a series, of the default machine class unless
		// a class is given.
		"seriesURL": func(scenario, metric, point string, class ...string) string {
			v := url.Values{"scenario": {scenario}, "metric": {metric}, "point": {point}}
			if len(class) > 0 && class[0] != "" {
				v.Set("class", class[0])
			}
			return "/series?" + v.Encode()
		},
		"path": url.PathEscape,
		"json": func(v any) (template.JS, error) {
			data, err := json.Marshal(v)
			return template.JS(data), err
		},
	}
}

// short abbreviates a commit hash.
func short(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}

// num formats a measured value with 4 significant digits.
func num(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "–"
	}
	return fmt.Sprintf("%.4g", f)
}
