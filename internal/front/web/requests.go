package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Request is the body of POST /api/requests and what the request form
// posts: a bisection or a comparison for the daemon to run. Field names
// are stable.
type Request struct {
	// Kind is "bisect" or "compare".
	Kind string `json:"kind"`
	// Scenario is the scenario: a name from the server's scenario
	// directory (copy-single), never a path.
	Scenario string `json:"scenario"`
	// Good and Bad are the revisions a bisection searches between.
	Good string `json:"good,omitempty"`
	Bad  string `json:"bad,omitempty"`
	// A and B are the revisions a comparison measures: the baseline and
	// the candidate.
	A string `json:"a,omitempty"`
	B string `json:"b,omitempty"`
	// Metric is what a bisection bisects on (a comparison judges every
	// metric); empty takes the scenario's first.
	Metric string `json:"metric,omitempty"`
	// Point is the matrix point; empty takes a bisection's only point, or
	// every point of a comparison.
	Point string `json:"point,omitempty"`
	// MinEffect (a fraction: 0.05 is 5%) and MaxSamples override the
	// scenario's stats section; 0 keeps it.
	MinEffect  float64 `json:"min_effect,omitempty"`
	MaxSamples int     `json:"max_samples,omitempty"`
}

// requestFields are Request's JSON names, for errors.
const requestFields = "kind, scenario, good, bad, a, b, metric, point, min_effect, max_samples"

// ErrInvalid marks an error of Config.Enqueue that is the request's fault:
// the API answers it with 400 and the message.
var ErrInvalid = errors.New("invalid request")

// maxRequestBody bounds a request's body.
const maxRequestBody = 64 << 10

// FieldError is a request found wrong, naming the field at fault ("" for
// the body as a whole). Config.Enqueue may return one (wrapped with
// ErrInvalid) so the request form marks the field.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Msg)
}

// check checks a request's fields for its kind: what is required is
// there, nothing of the other kind is, numbers are in range.
func (req Request) check() error {
	need := map[string][]string{"bisect": {"scenario", "good", "bad"}, "compare": {"scenario", "a", "b"}}[req.Kind]
	if need == nil {
		return &FieldError{"kind", fmt.Sprintf(`%q is not a request this dashboard takes (want "bisect" or "compare")`, req.Kind)}
	}
	vals := map[string]string{"scenario": req.Scenario, "good": req.Good, "bad": req.Bad, "a": req.A, "b": req.B, "metric": req.Metric}
	for _, f := range need {
		if strings.TrimSpace(vals[f]) == "" {
			return &FieldError{f, fmt.Sprintf("required for a %s request", req.Kind)}
		}
	}
	foreign := map[string][]string{"bisect": {"a", "b"}, "compare": {"good", "bad", "metric"}}[req.Kind]
	for _, f := range foreign {
		if vals[f] != "" {
			hint := map[string]string{"a": "a bisection takes good and bad", "b": "a bisection takes good and bad",
				"good": "a comparison takes a and b", "bad": "a comparison takes a and b",
				"metric": "a comparison judges every metric of the scenario"}[f]
			return &FieldError{f, fmt.Sprintf("not part of a %s request (%s)", req.Kind, hint)}
		}
	}
	if req.MinEffect < 0 || req.MinEffect >= 1 {
		return &FieldError{"min_effect", fmt.Sprintf("%g is out of range: it is a fraction, 0.05 means 5%%", req.MinEffect)}
	}
	if req.MaxSamples < 0 {
		return &FieldError{"max_samples", fmt.Sprintf("%d: give a number of samples, or 0 for the scenario's", req.MaxSamples)}
	}
	return nil
}

// decodeRequest reads a JSON Request, naming the field at fault in its
// errors.
func decodeRequest(body io.Reader) (Request, error) {
	var req Request
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var te *json.UnmarshalTypeError
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &te):
			return req, &FieldError{te.Field, fmt.Sprintf("want a %s, got a JSON %s", te.Type, te.Value)}
		case errors.As(err, &mbe):
			return req, &FieldError{"", fmt.Sprintf("the body is over %d bytes", mbe.Limit)}
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return req, &FieldError{"", fmt.Sprintf("unknown field %s (the fields are %s)",
				strings.TrimPrefix(err.Error(), "json: unknown field "), requestFields)}
		}
		return req, &FieldError{"", fmt.Sprintf("the body is not a JSON request object: %v", err)}
	}
	// dec.More would take a stray ] or } after the object for the end.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, &FieldError{"", "the body holds more than one JSON value"}
	}
	return req, req.check()
}

// formRequest reads a Request from the request form's fields, which have
// the JSON names.
func formRequest(form url.Values) (Request, error) {
	req := Request{Kind: form.Get("kind"), Scenario: strings.TrimSpace(form.Get("scenario")),
		Good: strings.TrimSpace(form.Get("good")), Bad: strings.TrimSpace(form.Get("bad")),
		A: strings.TrimSpace(form.Get("a")), B: strings.TrimSpace(form.Get("b")),
		Metric: strings.TrimSpace(form.Get("metric")), Point: strings.TrimSpace(form.Get("point"))}
	if v := strings.TrimSpace(form.Get("min_effect")); v != "" {
		f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if err != nil {
			return req, &FieldError{"min_effect", fmt.Sprintf("%q is not a number", v)}
		}
		if strings.HasSuffix(v, "%") {
			f /= 100
		}
		req.MinEffect = f
	}
	if v := strings.TrimSpace(form.Get("max_samples")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return req, &FieldError{"max_samples", fmt.Sprintf("%q is not a whole number", v)}
		}
		req.MaxSamples = n
	}
	return req, req.check()
}

// enqueue queues a checked request, bounding the time it takes.
func (s *Server) enqueue(r *http.Request, req Request) (int64, error) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.QueryTimeout)
	defer cancel()
	id, err := s.cfg.Enqueue.Enqueue(ctx, req)
	if err == nil {
		s.log.Info("queued a request from the dashboard", "job", id, "kind", req.Kind, "scenario", req.Scenario)
	}
	return id, err
}

// writesOff is why this dashboard takes no writes, or nil.
func (s *Server) writesOff() error {
	if s.cfg.Token == "" || s.cfg.Enqueue == nil {
		return errors.New("requests are disabled on this dashboard: start pgbisect serve with PGBISECT_WEB_TOKEN set")
	}
	return nil
}

// requests is POST /api/requests. It queues nothing unless every check
// passes: writes enabled, the token, a well-formed body, the request valid
// for Config.Enqueue.
func (s *Server) requests(w http.ResponseWriter, r *http.Request) {
	if err := s.writesOff(); err != nil {
		s.fail(w, r, http.StatusForbidden, err)
		return
	}
	if !s.canWrite(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pgbisect"`)
		s.fail(w, r, http.StatusUnauthorized, errors.New("authentication required: send Authorization: Bearer TOKEN (the PGBISECT_WEB_TOKEN of the server)"))
		return
	}
	req, err := decodeRequest(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	id, err := s.enqueue(r, req)
	if errors.Is(err, ErrInvalid) {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(struct { //nolint:errcheck // the client went away
		ID   int64  `json:"id"`
		Kind string `json:"kind"`
	}{id, req.Kind})
}

// formData is what the request page shows: the form last posted (its
// values kept) and what was wrong with it.
type formData struct {
	Req       Request
	Err       string
	Field     string
	Scenarios []string
}

// requestForm is GET /request: the forms for a bisection and a
// comparison, or the sign-in form first.
func (s *Server) requestForm(w http.ResponseWriter, r *http.Request) {
	if err := s.writesOff(); err != nil {
		s.fail(w, r, http.StatusForbidden, err)
		return
	}
	if !s.canWrite(r) {
		s.loginPage(w, r, http.StatusUnauthorized, "/request", "Sign in with the dashboard's token to request work.")
		return
	}
	s.render(w, r, http.StatusOK, "request", "Request a bisection or a comparison", formData{Scenarios: s.cfg.Scenarios})
}

// requestPost is POST /request, the form's target: it queues the request
// and shows the overview, or shows the form again with what was wrong.
func (s *Server) requestPost(w http.ResponseWriter, r *http.Request) {
	if err := s.writesOff(); err != nil {
		s.fail(w, r, http.StatusForbidden, err)
		return
	}
	if !s.canWrite(r) {
		s.loginPage(w, r, http.StatusUnauthorized, "/request", "Sign in with the dashboard's token to request work.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("reading the form: %w", err))
		return
	}
	req, err := formRequest(r.PostForm)
	var id int64
	if err == nil {
		id, err = s.enqueue(r, req)
	}
	if err != nil {
		status := http.StatusBadRequest
		if !errors.Is(err, ErrInvalid) && !errors.As(err, new(*FieldError)) {
			status = http.StatusInternalServerError
			s.log.Error("queueing a request from the form", "err", err)
		}
		d := formData{Req: req, Err: err.Error(), Scenarios: s.cfg.Scenarios}
		var fe *FieldError
		if errors.As(err, &fe) {
			d.Field = fe.Field
		}
		s.render(w, r, status, "request", "Request a bisection or a comparison", d)
		return
	}
	http.Redirect(w, r, "/?queued="+strconv.FormatInt(id, 10)+"#queue", http.StatusSeeOther)
}
