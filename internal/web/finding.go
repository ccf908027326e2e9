package web

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

// md renders notify's Markdown reports. Raw HTML in them is not passed
// through (goldmark's default), so a commit subject cannot inject markup.
var md = goldmark.New(goldmark.WithExtensions(extension.GFM))

// finding shows a finding's report as notify renders it for GitHub, with its
// plots drawn by notify and links to the issues it was posted to.
func (s *Server) finding(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	f, err := s.st.Finding(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d := struct {
		F       store.Finding
		Report  template.HTML
		Problem string
	}{F: f}
	nf, err := notify.Unmarshal(f.Report)
	if err == nil {
		var names []string
		names, err = s.drawPlots(nf)
		nf.Plots = names
		var buf bytes.Buffer
		body := notify.Markdown(nf, notify.Options{PlotURL: "/findings/" + url.PathEscape(f.ID) + "/plots/"})
		if cerr := md.Convert([]byte(body), &buf); cerr != nil && err == nil {
			err = cerr
		}
		d.Report = template.HTML(buf.String()) //nolint:gosec // goldmark escapes raw HTML
	}
	if err != nil {
		d.Problem = err.Error()
	}
	s.render(w, r, http.StatusOK, "finding", "Finding "+f.ID, d)
}

// drawPlots draws nf's plots into a temporary directory and returns their
// names; the directory is removed.
func (s *Server) drawPlots(nf *notify.Finding) ([]string, error) {
	dir, err := os.MkdirTemp("", "pgbisect-web-plots-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	return notify.WritePlots(dir, nf)
}

// findingPlot serves one plot of a finding, drawn on request.
func (s *Server) findingPlot(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	f, err := s.st.Finding(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	nf, err := notify.Unmarshal(f.Report)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("finding %s has no readable report: %w", f.ID, err))
		return
	}
	dir, err := os.MkdirTemp("", "pgbisect-web-plots-")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	defer os.RemoveAll(dir)
	names, err := notify.WritePlots(dir, nf)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	file := r.PathValue("file")
	if !slices.Contains(names, file) {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("finding %s has no plot %q (it has %v)", f.ID, file, names))
		return
	}
	w.Header().Set("Cache-Control", "max-age=300")
	http.ServeFile(w, r, filepath.Join(dir, file))
}
