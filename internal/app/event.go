package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/store"
)

// Kind is what an Event reports.
type Kind string

// Event kinds. The decision kinds (verdict, split, skip, check, culprit,
// outcome, resume) are the bisection engine's, one per decision it makes.
const (
	KindNote          Kind = "note"           // anything else a person watching is told
	KindStart         Kind = "start"          // a bisection started: its ID and range
	KindStatus        Kind = "status"         // where a bisection is, before each build and sample
	KindBuildStarted  Kind = "build-started"  // a commit is being built (or found in the cache)
	KindBuildStep     Kind = "build-step"     // a line of build (or clone) progress
	KindBuildFinished Kind = "build-finished" // a build is ready
	KindBuildFailed   Kind = "build-failed"   // a commit does not build
	KindSample        Kind = "sample"         // one sample was taken
	KindVerdict       Kind = "verdict"
	KindEndpoints     Kind = "endpoints" // the verdict on the good..bad range, the first
	KindSplit         Kind = "split"
	KindSkip          Kind = "skip" // a commit that cannot be built or measured
	KindCheck         Kind = "check"
	KindCulprit       Kind = "culprit"
	KindOutcome       Kind = "outcome"
	KindResume        Kind = "resume"
	KindGuide         Kind = "guide" // what a profile of the endpoints points the search at
	// KindAnswer is a bisection's answer, saved (and posted) before its
	// extras, the revert checks and profiles, which update it after.
	KindAnswer Kind = "answer"
	// KindDone ends an operation's events (Error says why, when it
	// failed). An interrupted operation records none: a resumed bisection
	// continues the same stream.
	KindDone Kind = "done"
	// KindBisected carries a queued bisection's result (Bisected) to the
	// job's log, which prints it as 'pgbisect bisect' does. It goes to the
	// daemon's sink only, never to an events stream.
	KindBisected Kind = "bisected"
)

// Decision reports whether k is one of the bisection engine's decisions,
// which a terminal shows as "==> TEXT".
func (k Kind) Decision() bool {
	switch k {
	case KindVerdict, KindEndpoints, KindSplit, KindSkip, KindCheck, KindCulprit, KindOutcome, KindResume, KindGuide, KindAnswer:
		return true
	}
	return false
}

// Event is one step of an operation's progress. It is JSON: a follower in
// another process reads it back from the results store (store.FollowEvents)
// as it was emitted.
type Event struct {
	Kind Kind      `json:"kind"`
	At   time.Time `json:"at"`
	// Text is the line a person watching is shown; empty for events only
	// programs follow (build started and finished, samples of a bisection,
	// done).
	Text string `json:"text,omitempty"`

	// Bisection is the bisection's ID (start, decisions, done).
	Bisection string `json:"bisection,omitempty"`
	// Commit is the commit built, sampled or decided about (full hash).
	Commit string `json:"commit,omitempty"`
	// Target names the build sampled (a short hash, or a bin directory).
	Target string `json:"target,omitempty"`
	// Point and Metric say what a sample measured.
	Point  string  `json:"point,omitempty"`
	Metric string  `json:"metric,omitempty"`
	Value  float64 `json:"value,omitempty"`
	// Done and Of count samples (of a comparison, or of a bisection step).
	Done int `json:"done,omitempty"`
	Of   int `json:"of,omitempty"`
	// Finding is the ID of the finding an operation produced (done).
	Finding string `json:"finding,omitempty"`
	// Error says why an operation or a build failed.
	Error string `json:"error,omitempty"`
	// Result is what an operation without a finding found, in a few lines
	// (a comparison's verdicts, done).
	Result string `json:"result,omitempty"`
	// Short is a status event's Text in a few words, for a status line
	// a terminal updates in place.
	Short string `json:"short,omitempty"`
	// Bisected is a finished bisection (KindBisected), for a printer in
	// this process: it is not part of the event's JSON.
	Bisected *BisectResult `json:"-"`
}

// BisectResult is what a finished bisection leaves behind.
type BisectResult struct {
	State     *bisect.State
	Finding   *finding.Finding
	ReportDir string
}

// Sink receives an operation's events in order, from the goroutine that
// runs the operation. A nil Sink discards them.
type Sink func(Event)

func (s Sink) emit(e Event) {
	if s == nil {
		return
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	s(e)
}

// note emits a note with a formatted text.
func (s Sink) note(format string, args ...any) {
	s.emit(Event{Kind: KindNote, Text: fmt.Sprintf(format, args...)})
}

// journal makes an operation's events durable: each event is appended to
// the results store under the job id (once there is one) before it is passed
// on, so a follower in another process sees what a terminal sees, in the
// same order.
type journal struct {
	ctx   context.Context
	st    *store.Store
	log   *slog.Logger
	next  Sink
	job   string
	mu    sync.Mutex
	fails int
}

// newJournal returns a journal whose sink appends each event to st (once
// set) under jobID (once set, see setJob: a bisection's ID is known only
// once it started) and then passes it to next.
func newJournal(ctx context.Context, st *store.Store, jobID string, next Sink, log *slog.Logger) *journal {
	return &journal{ctx: ctx, st: st, job: jobID, next: next, log: log}
}

// setStore makes the events to come durable in st.
func (j *journal) setStore(st *store.Store) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.st = st
}

// setJob sets the job id of the events to come, unless one is set.
func (j *journal) setJob(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.job == "" {
		j.job = id
	}
}

func (j *journal) sink() Sink {
	return func(e Event) {
		if e.At.IsZero() {
			e.At = time.Now()
		}
		j.mu.Lock()
		job, st := j.job, j.st
		j.mu.Unlock()
		if job != "" && st != nil && j.ctx.Err() == nil {
			data, err := json.Marshal(e)
			if err == nil {
				_, err = st.AppendEvent(j.ctx, job, string(e.Kind), data)
			}
			if err != nil && j.ctx.Err() == nil {
				// Progress is not worth failing the work for; say so
				// once, not on every event.
				j.mu.Lock()
				j.fails++
				first := j.fails == 1
				j.mu.Unlock()
				if first {
					j.log.Warn("events not recorded in the results store", slog.String("job", job), slog.Any("err", err))
				}
			}
		}
		j.next.emit(e)
	}
}

// Journal returns a sink that appends each event to st under jobID before
// passing it to next: how a queued job that does not record its own events
// (a comparison) is made followable from another process.
func Journal(ctx context.Context, st *store.Store, jobID string, next Sink, log *slog.Logger) Sink {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return newJournal(ctx, st, jobID, next, log).sink()
}

// Decode reads an event back from its stored form.
func Decode(e store.Event) (Event, error) {
	var ev Event
	if err := json.Unmarshal(e.Payload, &ev); err != nil {
		return ev, fmt.Errorf("event %d of job %s: %w", e.Seq, e.JobID, err)
	}
	return ev, nil
}

// lineWriter is an io.Writer for components that report progress as text
// (the builder, the benchmark runner): each complete line becomes an event
// of kind k. The sink can be changed between operations.
type lineWriter struct {
	mu   sync.Mutex
	kind Kind
	sink Sink
	buf  []byte
}

func newLineWriter(sink Sink, k Kind) *lineWriter { return &lineWriter{sink: sink, kind: k} }

func (l *lineWriter) set(sink Sink) {
	l.mu.Lock()
	l.sink = sink
	l.mu.Unlock()
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimRight(string(l.buf[:i]), "\r "); line != "" {
			l.sink.emit(Event{Kind: l.kind, Text: line})
		}
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}
