package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/store"
)

// maxStreamID bounds an event stream's name: job-KEY or a bisection's ID
// is far shorter.
const maxStreamID = 200

// events streams job {job}'s stored events as server-sent events, from
// after the Last-Event-ID the browser resends on reconnecting, or ?after=N,
// until the job's last event ("done") or the client goes away. Each
// event's data is an eventView as JSON and its id the event's sequence
// number. After the last event the server ends the stream, and a browser
// reconnecting after it gets 204 No Content, which tells an EventSource
// not to reconnect: a page of finished work holds no connection open.
//
// A stream costs the server a goroutine and a connection, no database
// connection (the store's followers share one listener), so it is
// bounded: only a stream that exists is followed (404 otherwise: one with
// events, a queue job's not finished, or a stored bisection); a client
// may hold Config.StreamsPerClient at once (429 beyond) and the server
// Config.Streams (503 beyond); and each ends after timeouts.streamLife,
// when the browser reconnects from the last event it saw.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	job := r.PathValue("job")
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	var afterSeq int64
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 0 {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("after=%q: want the sequence number of the last event seen", after))
			return
		}
		afterSeq = n
	}
	ctx, cancel := s.ctx(r)
	last, err := s.st.LastEvents(ctx, job, 1)
	if err == nil && len(last) == 0 {
		err = s.streamExists(ctx, job)
	}
	cancel()
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if len(last) == 1 && last[0].Kind == string(app.KindDone) && last[0].Seq <= afterSeq {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	status, release := s.slots.take(clientOf(r))
	if status != 0 {
		w.Header().Set("Retry-After", "30")
		msg := "this address has its share of event streams open: close a page or two"
		if status == http.StatusServiceUnavailable {
			msg = "the dashboard has all the event streams it serves open: try again later"
		}
		http.Error(w, msg, status)
		return
	}
	defer release()
	s.streams.Add(1)
	defer s.streams.Add(-1)
	rc := http.NewResponseController(w)
	// The stream outlives the server's read and write timeouts: no read
	// deadline (a GET has no body, and net/http would end the stream's
	// context when its background read timed out), and a write deadline
	// set again before each write, so only a client that stops reading
	// is cut off.
	rc.SetReadDeadline(time.Time{}) //nolint:errcheck // not a connection (a test's recorder): no deadline to clear
	write := func(format string, args ...any) error {
		rc.SetWriteDeadline(time.Now().Add(s.timeouts.write)) //nolint:errcheck // as above
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	// A comment first, so the browser sees the stream open at once. The
	// name is quoted: a decoded path can hold a CR or LF, which would
	// start a field of the client's choosing.
	if err := write(": following %s\n\n", strconv.Quote(job)); err != nil {
		return
	}
	sctx, stop := context.WithTimeout(r.Context(), s.timeouts.streamLife)
	defer stop()
	err = s.st.FollowEvents(sctx, job, afterSeq, func(e store.Event) error {
		data, err := json.Marshal(viewEvent(e)) // JSON: no raw CR or LF
		if err != nil {
			return err
		}
		if err := write("id: %d\ndata: %s\n\n", e.Seq, data); err != nil {
			return err
		}
		if e.Kind == string(app.KindDone) {
			return store.ErrStopFollowing
		}
		return nil
	})
	if err != nil && sctx.Err() == nil {
		s.log.Warn("following job events", "job", strconv.Quote(job), "err", err)
	}
}

// streamExists says whether job, a stream without events, is one to
// follow: the events of a queue job not finished (it starts writing them
// when it runs), or a stored bisection's own (run from the command line).
// Anything else is store.ErrNotFound.
func (s *Server) streamExists(ctx context.Context, job string) error {
	notFound := fmt.Errorf("no event stream %q: it has no events, and no job waiting or running or bisection has that name: %w",
		job, store.ErrNotFound)
	if len(job) > maxStreamID {
		return notFound
	}
	if s.cfg.Jobs != nil {
		js, err := s.cfg.Jobs.Jobs(ctx, 0)
		if err != nil {
			return err
		}
		for _, j := range js {
			if jobs.EventsOf(j.Key) == job {
				return nil
			}
		}
	}
	_, err := s.st.LoadBisection(ctx, job)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, bisect.ErrNotFound) {
		return notFound
	}
	return err
}
