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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
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
	if errors.As(err, new(badParam)) {
		status = http.StatusBadRequest
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

// badParam is a malformed parameter of the request (an id that is not a
// number): fail answers 400.
type badParam struct{ error }

func (e badParam) Unwrap() error { return e.error }

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
		"request":  requestOf,
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return "–"
			}
			return time.Since(t).Round(time.Second).String() + " ago"
		},
		"num": num,
		"dur": duration,
		"hasLog": func(bs []store.Build) bool {
			return slices.ContainsFunc(bs, func(b store.Build) bool { return b.LogPath != "" })
		},
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

// commitHref links a commit to Config.CommitURL when set, else to its
// page when it was measured, else nowhere ("").
func (s *Server) commitHref(hash string, measured bool) string {
	switch {
	case s.cfg.CommitURL != "":
		return s.cfg.CommitURL + hash
	case measured:
		return "/commits/" + url.PathEscape(hash)
	}
	return ""
}

// short abbreviates a commit hash.
func short(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}

// num formats a measured value for people: 4 significant digits, never an
// exponent; from 10,000 on, whole with thousands separated (300,000 rows,
// 12,345 tps).
func num(f float64) string {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return "–"
	case math.Abs(f) >= 1e4:
		return grouped(int64(math.Round(f)))
	}
	// %g with 4 digits has no exponent from 1e-4 up to 1e4; smaller
	// values keep theirs.
	return strconv.FormatFloat(f, 'g', 4, 64)
}

// grouped writes n with a comma between groups of three digits.
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// duration formats a build's or a run's time for people: 10.76 s,
// 1 min 35 s, 2 h 5 min.
func duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
}
