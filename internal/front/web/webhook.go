package web

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// The webhook route is public (GitHub must reach it) and its handler reads
// the whole body before it can check the signature, so the server bounds a
// delivery before the handler sees it: its size (Config.WebhookMaxBody,
// refused with 413 from the Content-Length alone, or once that many bytes
// were read of a body of unknown length), the time to send it (bodyDeadline,
// as for every body), and how many are read at once (maxWebhookBodies), so
// that what deliveries can hold in memory is bounded.

// DefaultWebhookMaxBody is Config.WebhookMaxBody's default: 25 MiB, GitHub's
// cap on a webhook payload, so no delivery GitHub sends is refused (an
// issue_comment is a few kilobytes).
const DefaultWebhookMaxBody = 25 << 20

// maxWebhookBodies is how many webhook deliveries are read at once; more get
// 503 (GitHub shows the delivery as failed and the comment poll picks the
// command up).
const maxWebhookBodies = 8

// limitWebhook wraps the webhook handler h in the limits.
func (s *Server) limitWebhook(h http.Handler) http.Handler {
	busy := make(chan struct{}, maxWebhookBodies)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := s.cfg.WebhookMaxBody
		if r.ContentLength > limit {
			w.Header().Set("Connection", "close") // the body is not read
			http.Error(w, fmt.Sprintf("a webhook delivery of %d bytes is over the %d bytes this server takes", r.ContentLength, limit),
				http.StatusRequestEntityTooLarge)
			return
		}
		select {
		case busy <- struct{}{}:
			defer func() { <-busy }()
		default:
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "10")
			http.Error(w, fmt.Sprintf("%d webhook deliveries are being read: try again later", maxWebhookBodies), http.StatusServiceUnavailable)
			return
		}
		body := &cappedBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit)}
		r.Body = body
		h.ServeHTTP(&tooLargeWriter{ResponseWriter: w, body: body}, r)
	})
}

// cappedBody notes when its MaxBytesReader reached the limit.
type cappedBody struct {
	io.ReadCloser
	mu   sync.Mutex
	over bool
}

func (b *cappedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.As(err, new(*http.MaxBytesError)) {
		b.mu.Lock()
		b.over = true
		b.mu.Unlock()
	}
	return n, err
}

func (b *cappedBody) tooLarge() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.over
}

// tooLargeWriter answers 413, whatever the handler's status, once the body
// was found over the limit: the handler sees only a read error, which it
// may take for a bad signature.
type tooLargeWriter struct {
	http.ResponseWriter
	body  *cappedBody
	wrote bool
}

func (w *tooLargeWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if w.body.tooLarge() {
		code = http.StatusRequestEntityTooLarge
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *tooLargeWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap gives http.ResponseController the connection's writer.
func (w *tooLargeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bodyDeadline gives a request with a body s.timeouts.body to send it, so a
// client sending a body slowly holds a connection that long at most. The
// deadline is cleared once the body is read to its end: it must not end
// the request's context while the handler still works (net/http cancels
// the context when a read after the body fails).
func (s *Server) bodyDeadline(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(s.timeouts.body)); err != nil {
		return // not a connection (a test's recorder)
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
}

// deadlineBody clears the read deadline when its body ends.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{}) //nolint:errcheck // supported: it was set
	}
	return n, err
}
