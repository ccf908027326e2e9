package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Request is the body of POST /api/requests: a bisection for the daemon to
// run. Field names are stable.
type Request struct {
	// Kind is what to do; only "bisect" is taken.
	Kind string `json:"kind"`
	// Scenario is the scenario file, a path on the server.
	Scenario string `json:"scenario"`
	// Good and Bad are the revisions to bisect between.
	Good string `json:"good"`
	Bad  string `json:"bad"`
	// Metric and Point choose what to bisect on; empty takes the
	// scenario's defaults.
	Metric string `json:"metric,omitempty"`
	Point  string `json:"point,omitempty"`
}

// ErrInvalid marks an error of Config.Enqueue that is the request's fault:
// the API answers it with 400 and the message.
var ErrInvalid = errors.New("invalid request")

// maxRequestBody bounds a request's body.
const maxRequestBody = 64 << 10

// authorized reports whether r carries the bearer token, compared in
// constant time (hashes of equal length, so not even the token's length
// leaks).
func (s *Server) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(s.cfg.Token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// requests is POST /api/requests. It queues nothing unless every check
// passes: writes enabled, the token, a well-formed body, the request valid
// for Config.Enqueue.
func (s *Server) requests(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Token == "" || s.cfg.Enqueue == nil {
		s.fail(w, r, http.StatusForbidden, errors.New("requests are disabled on this dashboard: start pgbisect serve with PGBISECT_WEB_TOKEN set"))
		return
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pgbisect"`)
		s.fail(w, r, http.StatusUnauthorized, errors.New("authentication required: send Authorization: Bearer TOKEN (the PGBISECT_WEB_TOKEN of the server)"))
		return
	}
	req, err := decodeRequest(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.QueryTimeout)
	defer cancel()
	id, err := s.cfg.Enqueue(ctx, req)
	if errors.Is(err, ErrInvalid) {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.log.Info("queued a request from the dashboard", "job", id, "kind", req.Kind, "good", req.Good, "bad", req.Bad)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(struct { //nolint:errcheck // the client went away
		ID   int64  `json:"id"`
		Kind string `json:"kind"`
	}{id, req.Kind})
}

// decodeRequest reads a Request, naming the field at fault in its errors.
func decodeRequest(body io.Reader) (Request, error) {
	var req Request
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var te *json.UnmarshalTypeError
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &te):
			return req, fmt.Errorf("field %q: want a %s, got a JSON %s", te.Field, te.Type, te.Value)
		case errors.As(err, &mbe):
			return req, fmt.Errorf("the body is over %d bytes", mbe.Limit)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return req, fmt.Errorf("unknown field %s (the fields are kind, scenario, good, bad, metric, point)",
				strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return req, fmt.Errorf("the body is not a JSON request object: %w", err)
	}
	if dec.More() {
		return req, errors.New("the body holds more than one JSON value")
	}
	if req.Kind != "bisect" {
		return req, fmt.Errorf(`field "kind": %q is not a request this dashboard takes (want "bisect")`, req.Kind)
	}
	for _, f := range []struct{ name, v string }{{"scenario", req.Scenario}, {"good", req.Good}, {"bad", req.Bad}} {
		if strings.TrimSpace(f.v) == "" {
			return req, fmt.Errorf("field %q is required", f.name)
		}
	}
	return req, nil
}
