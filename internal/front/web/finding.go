package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/pgbisect/pgbisect/bisect/finding"
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
	nf, err := finding.Unmarshal(f.Report)
	if err == nil {
		err = s.storedFiles(ctx, f.ID, nf)
	}
	if err == nil {
		var files map[string][]byte
		files, err = s.drawPlots(f.ID, f.Report, nf)
		nf.Plots = nil // in notify's order
		for _, p := range []string{notify.PlotBisection, notify.PlotSeries, notify.PlotProgress} {
			for _, ext := range []string{".png", ".svg"} {
				if _, ok := files[p+ext]; ok {
					nf.Plots = append(nf.Plots, p+ext)
				}
			}
		}
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

// storedFiles keeps the flame graphs of nf that the results store has
// (notify.Publish stores them) and, for one it has not (a finding made
// before it kept them), drops the link and says where the file is.
func (s *Server) storedFiles(ctx context.Context, id string, nf *finding.Finding) error {
	names, err := s.st.FindingFiles(ctx, id)
	if err != nil {
		return err
	}
	for _, c := range nf.Culprits {
		p := c.Profile
		if p == nil || p.FlameGraph == "" || slices.Contains(names, p.FlameGraph) {
			continue
		}
		p.Warnings = append(p.Warnings, fmt.Sprintf("the differential flame graph %s is not in the results store: it is in the report directory "+
			"of the machine that made the finding (STATE/reports/%s/)", p.FlameGraph, id))
		p.FlameGraph = ""
	}
	return nil
}

// plotCache keeps the plots drawn for the last few findings, keyed by the
// finding and a hash of its report, so a page and its images draw them once.
type plotCache struct {
	mu      sync.Mutex
	entries map[string]map[string][]byte // key -> file name -> content
}

const plotCacheSize = 16

// drawPlots returns nf's plots by file name, drawing them (through a
// temporary directory, notify's only way) unless they are cached.
func (s *Server) drawPlots(id string, report []byte, nf *finding.Finding) (map[string][]byte, error) {
	sum := sha256.Sum256(report)
	key := id + "\x00" + hex.EncodeToString(sum[:])
	s.plots.mu.Lock()
	files, ok := s.plots.entries[key]
	s.plots.mu.Unlock()
	if ok {
		return files, nil
	}
	dir, err := os.MkdirTemp("", "pgbisect-web-plots-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	names, err := notify.WritePlots(dir, nf)
	if err != nil {
		return nil, err
	}
	files = map[string][]byte{}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		files[n] = data
	}
	s.plots.mu.Lock()
	defer s.plots.mu.Unlock()
	if s.plots.entries == nil || len(s.plots.entries) >= plotCacheSize {
		s.plots.entries = map[string]map[string][]byte{}
	}
	s.plots.entries[key] = files
	return files, nil
}

// findingPlot serves one plot of a finding.
func (s *Server) findingPlot(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	f, err := s.st.Finding(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	nf, err := finding.Unmarshal(f.Report)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("finding %s has no readable report: %w", f.ID, err))
		return
	}
	files, err := s.drawPlots(f.ID, f.Report, nf)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	file := r.PathValue("file")
	data, ok := files[file]
	at := f.Time
	if !ok {
		// Not drawn from the report: a file the store keeps (a flame graph).
		if data, at, err = s.st.FindingFile(ctx, f.ID, file); err != nil {
			s.fail(w, r, http.StatusNotFound, fmt.Errorf("finding %s has no plot %q (it has %v): %w", f.ID, file, slices.Sorted(maps.Keys(files)), err))
			return
		}
	}
	w.Header().Set("Cache-Control", "max-age=300")
	http.ServeContent(w, r, file, at, bytes.NewReader(data))
}
