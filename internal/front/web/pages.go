package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/store"
)

// environment is one recorded environment as the overview lists it.
type environment struct {
	ID      int64
	Name    string // host, or the environment id
	Detail  string // cpu, cores, kernel when recorded
	Samples int64
	Last    time.Time
}

// machineOf summarises an environment. Its JSON belongs to package bench;
// only a few well-known keys are looked at, and an unknown shape still
// lists the machine.
func environmentOf(m store.EnvironmentUse) environment {
	var info map[string]any
	json.Unmarshal(m.Info, &info) //nolint:errcheck // an unknown shape shows as the id
	out := environment{ID: m.EnvironmentID, Name: fmt.Sprintf("environment %d", m.EnvironmentID), Samples: m.Samples, Last: m.Last}
	if h, ok := info["host"].(string); ok && h != "" {
		out.Name = h
	}
	var parts []string
	for _, k := range []string{"cpu", "cores", "memory_mb", "kernel", "governor"} {
		if v, ok := info[k]; ok && fmt.Sprint(v) != "" {
			parts = append(parts, fmt.Sprintf("%s %v", strings.ReplaceAll(k, "_", " "), v))
		}
	}
	out.Detail = strings.Join(parts, ", ")
	return out
}

// machineRow is one machine that joined the queue ('pgbisect daemon'), as
// 'pgbisect status' lists it: its class, last heartbeat and current job.
type machineRow struct {
	store.Machine
	// Job is the queue job it runs, when it runs one the queue lists.
	Job *jobs.Job
}

func machineRows(ms []store.Machine, js []jobs.Job) []machineRow {
	byKey := map[string]*jobs.Job{}
	for i := range js {
		byKey[js[i].Key] = &js[i]
	}
	out := make([]machineRow, 0, len(ms))
	for _, m := range ms {
		row := machineRow{Machine: m}
		if m.Stopped.IsZero() && m.JobKey != "" {
			row.Job = byKey[m.JobKey]
		}
		out = append(out, row)
	}
	return out
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	var d struct {
		// Queued is the job the request form just queued.
		Queued       string
		Machines     []machineRow
		Environments []environment
		Running      []jobs.Job
		Elsewhere    []streamRow
		Queue        []jobs.Job
		Bisections   []store.BisectionInfo
		Findings     []store.Finding
		Nights       []store.NightlyRun
	}
	if q := r.URL.Query().Get("queued"); q != "" {
		if _, err := strconv.ParseInt(q, 10, 64); err == nil {
			d.Queued = q
		}
	}
	es, err := s.st.EnvironmentsUsed(ctx)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	for _, e := range es {
		d.Environments = append(d.Environments, environmentOf(e))
	}
	var js []jobs.Job
	if s.cfg.Jobs != nil {
		if js, err = s.cfg.Jobs.Jobs(ctx, 0); err != nil {
			s.fail(w, r, http.StatusInternalServerError, err)
			return
		}
		for _, j := range js {
			switch j.State {
			case "running":
				d.Running = append(d.Running, j)
			case "available", "scheduled", "retryable", "pending":
				d.Queue = append(d.Queue, j)
			}
		}
	}
	if d.Elsewhere, err = s.elsewhere(ctx); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	ms, err := s.st.Machines(ctx)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d.Machines = machineRows(ms, js)
	if d.Bisections, err = s.st.Bisections(ctx); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d.Bisections = d.Bisections[:min(len(d.Bisections), 10)]
	if d.Findings, err = s.st.Findings(ctx); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d.Findings = d.Findings[:min(len(d.Findings), 10)]
	if d.Nights, err = s.st.NightlyRuns(ctx, 10); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, r, http.StatusOK, "overview", "pgbisect", d)
}

// activeWithin is how recent a stream's last event must be for the work
// to show as running: a build or a sample reports at least this often,
// while a process killed without a last word drops out after it.
const activeWithin = 15 * time.Minute

// streamRow is work under way outside the queue (a bisection started from
// the command line, on any machine sharing the store), known by its event
// stream.
type streamRow struct {
	Stream string
	// Bisection is set when the stream is a bisection's (its ID), with
	// its phase in Status.
	Bisection, Status string
	Last              eventView
	LastAt            time.Time
}

// elsewhere lists the work under way outside the queue: the streams with
// a recent event that is not the last ("done"), but those of queue jobs
// (the queue lists its running ones) and of finished bisections.
func (s *Server) elsewhere(ctx context.Context) ([]streamRow, error) {
	streams, err := s.st.ActiveStreams(ctx, activeWithin, string(app.KindDone))
	if err != nil {
		return nil, err
	}
	var out []streamRow
	for _, st := range streams {
		if strings.HasPrefix(st.JobID, jobs.EventsOf("")) || st.BisectionStatus == "done" {
			continue
		}
		row := streamRow{Stream: st.JobID, Status: st.BisectionStatus, Last: viewEvent(st.Last), LastAt: st.Last.At}
		if st.BisectionStatus != "" {
			row.Bisection = st.JobID
		}
		out = append(out, row)
	}
	return out, nil
}

// night shows one nightly run: its samples (those of one series first when
// the link came from a chart) and the builds they ran on.
func (s *Server) night(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("no nightly run %q: ids are numbers", r.PathValue("id")))
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	run, err := s.st.NightlyRun(ctx, id)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	samples, err := s.st.Samples(ctx, store.SampleQuery{NightlyID: id, AnyPoint: true})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	q := r.URL.Query()
	sc, me, pt := q.Get("scenario"), q.Get("metric"), q.Get("point")
	focus := func(sm store.Sample) bool { return sc != "" && sm.Scenario == sc && sm.Metric == me && sm.Point == pt }
	slices.SortStableFunc(samples, func(a, b store.Sample) int {
		if fa, fb := focus(a), focus(b); fa != fb {
			if fa {
				return -1
			}
			return 1
		}
		return 0
	})
	builds, err := s.buildsOf(r, samples)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, r, http.StatusOK, "night", fmt.Sprintf("Nightly run %d", id), struct {
		Run     store.NightlyRun
		Samples []store.Sample
		Builds  []store.Build
		Focus   string
	}{run, samples, builds, strings.TrimSpace(sc + " " + pt + " " + me)})
}

// buildsOf reads the builds the samples ran on, in order of appearance.
func (s *Server) buildsOf(r *http.Request, samples []store.Sample) ([]store.Build, error) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	var out []store.Build
	seen := map[string]bool{}
	for _, sm := range samples {
		if seen[sm.BuildKey] {
			continue
		}
		seen[sm.BuildKey] = true
		b, err := s.st.Build(ctx, sm.BuildKey)
		if err != nil {
			// A sample's build may have been recorded elsewhere.
			out = append(out, store.Build{Key: sm.BuildKey, Commit: sm.Commit, Status: "not recorded"})
			continue
		}
		out = append(out, b)
	}
	return out, nil
}

// commit shows every measurement of one commit.
func (s *Server) commit(w http.ResponseWriter, r *http.Request) {
	hash := r.PathValue("hash")
	ctx, cancel := s.ctx(r)
	defer cancel()
	samples, err := s.st.Samples(ctx, store.SampleQuery{Commit: hash, AnyPoint: true})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if len(samples) == 0 {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no measurement of commit %q (commit pages take the full hash)", hash))
		return
	}
	builds, err := s.buildsOf(r, samples)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, r, http.StatusOK, "commit", "Commit "+short(hash), struct {
		Hash    string
		Samples []store.Sample
		Builds  []store.Build
	}{hash, samples, builds})
}

func (s *Server) bisections(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	bs, err := s.st.Bisections(ctx)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, r, http.StatusOK, "bisections", "Bisections", bs)
}
