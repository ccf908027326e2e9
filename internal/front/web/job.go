package web

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/store"
)

// jobView is one queued job with what its stored events say so far: the
// bisection and finding it made, and its last lines.
type jobView struct {
	Job       jobs.Job    `json:"job"`
	Events    string      `json:"events"` // the stream /events/{events} follows
	Bisection string      `json:"bisection,omitempty"`
	Finding   string      `json:"finding,omitempty"`
	Lines     []app.Event `json:"lines"`
	Last      *app.Event  `json:"-"`
	// LastSeq numbers the last event, where the page's stream starts.
	LastSeq int64 `json:"-"`
	// Request is the request's fields, Args the arguments as the page
	// shows them.
	Request requestView `json:"-"`
	Args    string      `json:"-"`
}

// jobLines is how many of a job's last events its page lists; jobFirst
// how many of its first it reads for the bisection's ID.
const (
	jobLines = 30
	jobFirst = 20
)

// loadJob reads job {id} and its events; a job the queue no longer has,
// or a dashboard without a queue, is a 404.
func (s *Server) loadJob(r *http.Request) (*jobView, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return nil, badParam{fmt.Errorf("no job %q: job ids are numbers", r.PathValue("id"))}
	}
	if s.cfg.Jobs == nil {
		return nil, fmt.Errorf("this dashboard has no job queue (start it with pgbisect serve or daemon --serve on the results database): %w", store.ErrNotFound)
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	j, err := s.cfg.Jobs.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	v := &jobView{Job: j, Events: jobs.EventsOf(j.Key), Lines: []app.Event{}, Request: requestOf(j.Args), Args: argsJSON(j.Args)}
	// The bisection's ID is in its first events, the finding's in its
	// last; a long job has thousands between them, which are not read.
	first, err := s.st.Events(ctx, v.Events, 0, jobFirst)
	if err != nil {
		return nil, err
	}
	last, err := s.st.LastEvents(ctx, v.Events, jobLines)
	if err != nil {
		return nil, err
	}
	if n := len(last); n > 0 {
		v.LastSeq = last[n-1].Seq
	}
	for i, e := range append(first, last...) {
		ev, err := app.Decode(e)
		if err != nil {
			continue
		}
		if ev.Bisection != "" && v.Bisection == "" {
			v.Bisection = ev.Bisection
		}
		if ev.Finding != "" {
			v.Finding = ev.Finding
		}
		if i >= len(first) {
			v.Lines = append(v.Lines, ev)
		}
	}
	if n := len(v.Lines); n > 0 {
		v.Last = &v.Lines[n-1]
	}
	return v, nil
}

// job shows one job: its state, machine and request, the bisection and
// finding it made, and its progress live. GitHub replies link here.
func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	v, err := s.loadJob(r)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, r, http.StatusOK, "job", fmt.Sprintf("Job %d: %s", v.Job.ID, v.Job.Kind), v)
}

// jobJSON is the job page's data.
func (s *Server) jobJSON(w http.ResponseWriter, r *http.Request) {
	v, err := s.loadJob(r)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.writeJSON(w, v)
}
