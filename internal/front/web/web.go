// Package web is pgbisect's dashboard: HTML pages over the results store
// (overview, nightly series, bisections, findings, commits), a bisection
// page that follows the job's stored event stream over server-sent events,
// and /metrics for Prometheus.
//
// The design choice that matters: the pages read only the results store,
// never the process that does the work. A bisection running in the daemon,
// in another shell or on another machine sharing the database shows live,
// because its progress reaches the page through the store's event stream
// (LISTEN/NOTIFY), not through memory. Everything the browser loads (the
// chart library included) is embedded in the binary, so the dashboard works
// on a benchmark farm with no internet. Its one write, queueing a bisection
// or a comparison (POST /api/requests, or the request form), needs the
// token; reads need it too on a private dashboard (auth.go).
package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
	"github.com/pgbisect/pgbisect/store"
)

// Results are the reads the pages make; *store.Store has them.
type Results interface {
	Machines(ctx context.Context) ([]store.Machine, error)
	EnvironmentsUsed(ctx context.Context) ([]store.EnvironmentUse, error)
	NightlyRuns(ctx context.Context, limit int) ([]store.NightlyRun, error)
	NightlyRun(ctx context.Context, id int64) (store.NightlyRun, error)
	SeriesKeys(ctx context.Context, branch string) ([]store.SeriesKey, error)
	ClassSeries(ctx context.Context, class, branch, scenario, metric, point string) ([]store.SeriesPoint, error)
	Samples(ctx context.Context, q store.SampleQuery) ([]store.Sample, error)
	Build(ctx context.Context, key string) (store.Build, error)
	Bisections(ctx context.Context, statuses ...string) ([]store.BisectionInfo, error)
	LoadBisection(ctx context.Context, id string) (*bisect.State, error)
	Findings(ctx context.Context) ([]store.Finding, error)
	Finding(ctx context.Context, id string) (store.Finding, error)
	FindingFiles(ctx context.Context, id string) ([]string, error)
	FindingFile(ctx context.Context, id, name string) ([]byte, time.Time, error)
	BisectionsPage(ctx context.Context, limit int, after string) ([]store.BisectionSummary, error)
	FindingsPage(ctx context.Context, limit int, after string) ([]store.Finding, error)
}

// Events is a job's stored event stream; *store.Store has it.
type Events interface {
	Events(ctx context.Context, jobID string, afterSeq int64, limit int) ([]store.Event, error)
	LastEvents(ctx context.Context, jobID string, n int) ([]store.Event, error)
	FollowEvents(ctx context.Context, jobID string, afterSeq int64, fn func(store.Event) error) error
	ActiveStreams(ctx context.Context, within time.Duration, ended ...string) ([]store.Stream, error)
}

// Counter gives the totals /metrics reports; *store.Store has it.
type Counter interface {
	Counts(ctx context.Context) (store.Counts, error)
}

// JobLister lists the jobs not finished and the last finished ones, and
// reads one (store.ErrNotFound when the queue no longer has it).
type JobLister interface {
	Jobs(ctx context.Context, recent int) ([]jobs.Job, error)
	Job(ctx context.Context, id int64) (jobs.Job, error)
}

// Store is everything the dashboard reads.
type Store interface {
	Results
	Events
	Counter
}

// DefaultAddr is where Serve listens when Config.Addr is empty: the
// loopback interface only, since the pages are public unless
// Config.Private.
const DefaultAddr = "127.0.0.1:8080"

// Config configures a Server.
type Config struct {
	// Addr is host:port to listen on. Default: DefaultAddr.
	Addr string
	// Branch limits the nightly series to one branch. Default: every branch.
	Branch string
	// CommitURL, when set, links commit hashes to it with the hash appended
	// (e.g. "https://github.com/postgres/postgres/commit/"). Default: none.
	CommitURL string
	// QueryTimeout bounds each page's reads. Default: 30s.
	QueryTimeout time.Duration
	// Log gets request errors; nil discards them.
	Log *slog.Logger

	// Jobs lists the queue's jobs (internal/front/jobs' Queue); nil shows no
	// running job or queue.
	Jobs JobLister
	// Webhook, when set, takes GitHub's issue_comment deliveries at POST
	// /github/webhook (it checks their signature itself). The route is
	// public, so the server bounds what a delivery may cost before the
	// handler sees it (webhook.go).
	Webhook http.Handler
	// WebhookMaxBody is the largest webhook body taken, in bytes; a
	// larger one is refused with 413 without being read. Default:
	// DefaultWebhookMaxBody, GitHub's own cap on a delivery.
	WebhookMaxBody int64

	// Token authenticates writes (POST /api/requests, the request form),
	// as a bearer token or through a session made by signing in with it
	// at /login. Empty disables writes. It is never logged.
	Token string
	// Private makes every page, the API, the event streams and /metrics
	// need the token too. Default: public reads.
	Private bool
	// Scenarios are the scenario names the request form offers.
	Scenarios []string
	// Enqueue queues the requests (a Queue; EnqueueFunc in tests). Nil
	// disables writes.
	Enqueue Enqueuer
	// PublicURL is where readers reach the dashboard (github's
	// dashboard_url); when it is https, the session cookies are Secure
	// even though the server itself speaks plain HTTP behind a proxy.
	// Default: Secure only over TLS.
	PublicURL string

	// StreamsPerClient and Streams bound the event streams open at once,
	// from one client address (429 beyond) and in all (503 beyond).
	// Default: 6 (a browser's connections to one server) and 64. Behind
	// a proxy every reader has the proxy's address: raise
	// StreamsPerClient there.
	StreamsPerClient, Streams int
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Server is the dashboard. Create it with New; it is an http.Handler.
type Server struct {
	st    Store
	cop   *http.CrossOriginProtection
	cfg   Config
	log   *slog.Logger
	mux   *http.ServeMux
	pages map[string]*template.Template
	reg   *prometheus.Registry
	plots plotCache
	// streams counts the event streams open; slots bounds them.
	streams atomic.Int64
	slots   streamSlots
	// sessions are the signed-in browsers; guesses the wrong tokens per
	// client (auth.go).
	sessions sessions
	guesses  *buckets
	// limits of the connection and the streams; New sets the defaults,
	// tests shorter ones.
	timeouts timeouts
}

// timeouts are the server's time limits.
type timeouts struct {
	// header and body bound reading a request's header and its body; write
	// writing an answer (but for the event streams, whose each write gets
	// write again); idle a kept-alive connection's wait for the next
	// request.
	header, body, write, idle time.Duration
	// streamLife ends an event stream (the browser reconnects where it
	// left off, and so counts against the limits again).
	streamLife time.Duration
}

// New returns the dashboard over st.
func New(st Store, cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 30 * time.Second
	}
	if cfg.WebhookMaxBody <= 0 {
		cfg.WebhookMaxBody = DefaultWebhookMaxBody
	}
	if cfg.StreamsPerClient <= 0 {
		cfg.StreamsPerClient = 6
	}
	if cfg.Streams <= 0 {
		cfg.Streams = 64
	}
	s := &Server{st: st, cfg: cfg, log: cfg.Log, mux: http.NewServeMux(), pages: map[string]*template.Template{},
		cop:     http.NewCrossOriginProtection(),
		slots:   streamSlots{perClient: cfg.StreamsPerClient, total: cfg.Streams},
		guesses: newBuckets(guessBurst, guessEvery),
		// A page's answer has its queries' time and more to be written.
		timeouts: timeouts{header: 10 * time.Second, body: 30 * time.Second, write: cfg.QueryTimeout + 30*time.Second,
			idle: 2 * time.Minute, streamLife: 10 * time.Minute}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Private && cfg.Token == "" {
		return nil, errors.New("a private dashboard needs a token: set PGBISECT_WEB_TOKEN")
	}
	for name, files := range map[string][]string{
		"overview": nil, "serieslist": nil, "series": nil, "night": nil, "commit": nil,
		"bisections": nil, "bisection": {"live"}, "finding": nil, "error": nil, "login": nil, "request": nil, "job": nil,
	} {
		paths := []string{"templates/layout.html", "templates/" + name + ".html"}
		for _, f := range files {
			paths = append(paths, "templates/"+f+".html")
		}
		t, err := template.New(name).Funcs(s.funcs()).ParseFS(templateFS, paths...)
		if err != nil {
			return nil, fmt.Errorf("parsing the %s page template: %w", name, err)
		}
		s.pages[name] = t
	}
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(newCollector(st, s.log), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgbisect_event_streams",
			Help: "Event streams (/events/{job}) this server holds open."}, func() float64 { return float64(s.streams.Load()) }))
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	static, _ := fs.Sub(staticFS, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", cacheFor(time.Hour, http.FileServerFS(static))))
	s.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		http.ServeFileFS(w, r, static, "favicon.svg")
	})
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /{$}", s.overview)
	s.mux.HandleFunc("GET /series", s.series)
	s.mux.HandleFunc("GET /api/series", s.seriesJSON)
	s.mux.HandleFunc("GET /nights/{id}", s.night)
	s.mux.HandleFunc("GET /commits/{hash}", s.commit)
	s.mux.HandleFunc("GET /bisections", s.bisections)
	s.mux.HandleFunc("GET /bisections/{id}", s.bisection)
	s.mux.HandleFunc("GET /bisections/{id}/live", s.bisectionLive)
	s.mux.HandleFunc("GET /api/bisections", s.bisectionsJSON)
	s.mux.HandleFunc("GET /api/bisections/{id}", s.bisectionJSON)
	s.mux.HandleFunc("GET /api/findings", s.findingsJSON)
	s.mux.HandleFunc("GET /events/{job}", s.events)
	s.mux.HandleFunc("GET /jobs/{id}", s.job)
	s.mux.HandleFunc("GET /api/jobs/{id}", s.jobJSON)
	s.mux.HandleFunc("POST /api/requests", s.requests)
	s.mux.HandleFunc("GET /request", s.requestForm)
	s.mux.HandleFunc("POST /request", s.requestPost)
	s.mux.HandleFunc("GET /login", s.login)
	s.mux.HandleFunc("POST /login", s.loginPost)
	s.mux.HandleFunc("POST /logout", s.logout)
	if s.cfg.Webhook != nil {
		s.mux.Handle("POST /github/webhook", s.limitWebhook(s.cfg.Webhook))
	}
	s.mux.HandleFunc("GET /findings/{id}", s.finding)
	s.mux.HandleFunc("GET /findings/{id}/plots/{file}", s.findingPlot)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no page %s", r.URL.Path))
	})
}

// ServeHTTP serves the dashboard.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	// A browser's cross-origin POST is refused before anything else
	// (programs, such as curl or GitHub's webhook, send no Origin or
	// Sec-Fetch-Site and pass).
	if err := s.cop.Check(r); err != nil {
		http.Error(w, err.Error()+": a form on another site cannot post to the dashboard", http.StatusForbidden)
		return
	}
	s.bodyDeadline(w, r)
	if s.checkBearer(w, r) || s.private(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Serve serves the dashboard on ln until ctx ends, then shuts down: open
// event streams are ended and other requests get 10 seconds to finish.
//
// A request's header must arrive within 10 seconds and its body within
// 30 (bodyDeadline); an answer must be written within the query timeout
// and 30 seconds more, but for the event streams, which extend their own
// deadline at each write (events); a kept-alive connection is closed after
// 2 minutes without a request. There is no http.Server ReadTimeout: it
// would cancel a slow page's context, and an event stream's, when it
// passed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, stop := context.WithCancel(context.Background())
	defer stop()
	srv := &http.Server{Handler: s, ReadHeaderTimeout: s.timeouts.header, WriteTimeout: s.timeouts.write, IdleTimeout: s.timeouts.idle,
		BaseContext: func(net.Listener) context.Context { return base }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serving the dashboard: %w", err)
	case <-ctx.Done():
	}
	stop() // ends the event streams, which would hold Shutdown
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("stopping the dashboard: %w", err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving the dashboard: %w", err)
	}
	return nil
}

// Listen opens the listener Serve takes, on Config.Addr.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w (choose another with --addr HOST:PORT)", s.cfg.Addr, err)
	}
	return ln, nil
}

func cacheFor(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(d.Seconds())))
		h.ServeHTTP(w, r)
	})
}
