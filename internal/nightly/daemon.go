package nightly

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/pgbisect/pgbisect/store"
)

// Queue is the daemon's view of the store's job queue; *store.Store
// satisfies it.
type Queue interface {
	// Claim marks the oldest queued job of one of kinds running under
	// worker and returns it, or nil when there is none.
	Claim(ctx context.Context, worker string, kinds ...string) (*store.Job, error)
	// Finish records the job as done (jobErr nil) or failed.
	Finish(ctx context.Context, id int64, jobErr error) error
	// Requeue puts the jobs left running under worker back in the queue in
	// their place. The daemon calls it when it starts: it holds the daemon
	// lock, so the daemon that claimed them under the same worker name is
	// dead, and its job is resumed first.
	Requeue(ctx context.Context, worker string) (int, error)
	// SetProgress records a running job's progress line for `pgbisect
	// status`.
	SetProgress(ctx context.Context, id int64, text string) error
}

// MaxAttempts bounds how often one job is claimed: a job that kills its
// daemon every time must not keep the queue from moving.
const MaxAttempts = 3

// Daemon runs the nightly pass on a schedule and on-demand jobs from the
// queue, one at a time, each under the machine lock. Start it with Start and
// stop it by cancelling the context given to Start; Wait returns when the
// job running then has checkpointed and stopped.
type Daemon struct {
	// StateDir holds the locks, the status file and the marker of an
	// interrupted nightly pass.
	StateDir string
	// Worker names this daemon in the queue. Default: hostname:StateDir.
	Worker string
	// Schedule says when Nightly runs; nil runs no nightly pass.
	Schedule Schedule
	// Nightly runs one nightly pass.
	Nightly func(ctx context.Context, progress func(string)) error
	// Queue holds on-demand jobs; nil takes none.
	Queue Queue
	// Kinds are the job kinds this daemon takes (all when empty).
	Kinds []string
	// RunJob runs one on-demand job. It must save its state as it goes:
	// when ctx is cancelled it returns, and the next daemon resumes it.
	RunJob func(ctx context.Context, job store.Job, progress func(string)) error
	// Poll is how often an idle daemon looks at the queue. Default 30s.
	Poll time.Duration
	// Log gets a health line per job. Default: discarded.
	Log *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time

	mu      sync.Mutex
	status  Status
	wake    chan struct{}
	done    chan struct{}
	err     error
	unlockD func()
}

// Status is what the daemon is doing, as written to StateDir/daemon.json
// for `pgbisect status`.
type Status struct {
	PID         int        `json:"pid"`
	Worker      string     `json:"worker"`
	Started     time.Time  `json:"started"`
	NextNightly time.Time  `json:"next_nightly,omitzero"`
	Current     *JobStatus `json:"current,omitempty"`
	Last        *JobStatus `json:"last,omitempty"`
	Stopped     time.Time  `json:"stopped,omitzero"`
}

// JobStatus is one job the daemon runs or ran.
type JobStatus struct {
	Kind     string    `json:"kind"` // "nightly" or the queued job's kind
	ID       int64     `json:"id,omitempty"`
	Started  time.Time `json:"started"`
	Progress string    `json:"progress,omitempty"`
	Result   string    `json:"result,omitempty"` // ok, failed, interrupted
	Error    string    `json:"error,omitempty"`
	Finished time.Time `json:"finished,omitzero"`
}

// File names in the state directory.
const (
	DaemonLockFile = "daemon.lock"
	StatusFile     = "daemon.json"
	// PendingFile marks a nightly pass that is due and not finished; it
	// survives a restart, so an interrupted pass runs again.
	PendingFile = "nightly.pending"
)

// Start takes the daemon lock (a second daemon on the same state directory
// is refused with the holder's pid) and starts the loop. It returns at
// once; the loop runs until ctx is done.
func (d *Daemon) Start(ctx context.Context) error {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Poll <= 0 {
		d.Poll = 30 * time.Second
	}
	if d.Worker == "" {
		host, _ := os.Hostname()
		d.Worker = host + ":" + d.StateDir
	}
	if d.Schedule != nil && d.Nightly == nil {
		return errors.New("daemon: a schedule without a nightly pass")
	}
	if d.Queue != nil && d.RunJob == nil {
		return errors.New("daemon: a queue without a job runner")
	}
	unlock, err := lockFile(ctx, filepath.Join(d.StateDir, DaemonLockFile), false, false)
	if err != nil {
		var busy *BusyError
		if errors.As(err, &busy) {
			return fmt.Errorf("another daemon runs on this state directory: %s; stop it first (or give this one another --state)", busy.Holder)
		}
		return err
	}
	d.unlockD = unlock
	if d.Queue != nil {
		n, err := d.Queue.Requeue(ctx, d.Worker)
		if err != nil {
			unlock()
			return err
		}
		if n > 0 {
			d.Log.Info("daemon: resuming jobs an earlier daemon left running", slog.Int("jobs", n))
		}
	}
	d.wake = make(chan struct{}, 1)
	d.done = make(chan struct{})
	d.status = Status{PID: os.Getpid(), Worker: d.Worker, Started: d.Now().UTC()}
	go d.loop(ctx)
	return nil
}

// Wait blocks until the daemon has stopped and returns why it stopped
// (nil after a cancelled context).
func (d *Daemon) Wait() error {
	<-d.done
	return d.err
}

// Wake makes an idle daemon look at the queue now instead of at the next
// poll.
func (d *Daemon) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *Daemon) loop(ctx context.Context) {
	defer close(d.done)
	defer d.unlockD()
	defer func() {
		d.mu.Lock()
		d.status.Stopped = d.Now().UTC()
		d.mu.Unlock()
		d.writeStatus()
		d.Log.Info("daemon stopped", slog.String("worker", d.Worker))
	}()

	pending := d.nightlyPending()
	var next time.Time
	if d.Schedule != nil {
		next = d.Schedule.Next(d.Now())
	}
	d.Log.Info("daemon started", slog.String("worker", d.Worker), slog.Time("next_nightly", next), slog.Bool("nightly_pending", pending))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		if d.Schedule != nil && !d.Now().Before(next) {
			// Fires missed while a job ran are one pass, not many.
			pending = true
			d.markNightly(next)
			next = d.Schedule.Next(d.Now())
		}
		d.mu.Lock()
		d.status.NextNightly = next.UTC()
		d.mu.Unlock()
		d.writeStatus()

		if pending {
			if d.runNightly(ctx) {
				pending = false
			}
			continue
		}
		if d.Queue != nil {
			ran, err := d.runQueued(ctx)
			if err != nil && ctx.Err() == nil {
				d.Log.Error("job queue", slog.Any("err", err))
			}
			if ran {
				continue
			}
		}

		wait := d.Poll
		if d.Queue == nil {
			wait = 24 * time.Hour
		}
		if d.Schedule != nil {
			wait = min(wait, max(next.Sub(d.Now()), 0))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-d.wake:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// runNightly runs one nightly pass and reports whether it is finished (ok or
// failed); false means it was interrupted and must run again.
func (d *Daemon) runNightly(ctx context.Context) bool {
	// A failed pass is logged by run and recorded by the pass itself; it
	// is finished all the same.
	err := d.run(ctx, "nightly", 0, func(ctx context.Context, progress func(string)) error {
		return d.Nightly(ctx, progress)
	}, func(error) error {
		err := os.Remove(filepath.Join(d.StateDir, PendingFile))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	})
	return !interrupted(ctx, err)
}

// runQueued claims and runs one queued job; ran is false when the queue
// was empty.
func (d *Daemon) runQueued(ctx context.Context) (ran bool, err error) {
	job, err := d.Queue.Claim(ctx, d.Worker, d.Kinds...)
	if err != nil || job == nil {
		return false, err
	}
	finish := func(jobErr error) error {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := d.Queue.Finish(fctx, job.ID, jobErr); err != nil {
			return fmt.Errorf("recording the end of job %d: %w", job.ID, err)
		}
		return nil
	}
	if job.Attempts > MaxAttempts {
		jobErr := fmt.Errorf("gave up after %d attempts: each one stopped the daemon before the job finished (see the daemon's log)", job.Attempts-1)
		d.Log.Error("job", slog.String("kind", job.Kind), slog.Int64("id", job.ID), slog.String("result", "failed"), slog.Any("err", jobErr))
		return true, finish(jobErr)
	}
	// An interrupted job stays running under our name; the next daemon
	// requeues and resumes it.
	_ = d.run(ctx, job.Kind, job.ID, func(ctx context.Context, progress func(string)) error {
		return d.RunJob(ctx, *job, progress)
	}, finish)
	return true, nil
}

// run runs one job under the machine lock, recovering a panic into an
// error; unless the job was interrupted it records the outcome with finish,
// then logs the job's health line.
func (d *Daemon) run(ctx context.Context, kind string, id int64, fn func(context.Context, func(string)) error, finish func(error) error) (err error) {
	js := &JobStatus{Kind: kind, ID: id, Started: d.Now().UTC()}
	unlock, err := LockMachine(ctx, d.StateDir, false)
	var busy *BusyError
	if errors.As(err, &busy) {
		d.Log.Info("waiting for the machine", slog.String("kind", kind), slog.String("holder", busy.Holder.String()))
		unlock, err = LockMachine(ctx, d.StateDir, true)
	}
	if err == nil {
		d.mu.Lock()
		d.status.Current = js
		d.mu.Unlock()
		d.writeStatus()
		err = d.protect(ctx, fn, func(p string) { d.progress(ctx, js, p) })
		unlock()
	}
	var ferr error
	if !interrupted(ctx, err) {
		ferr = finish(err)
	}

	js.Finished = d.Now().UTC()
	attrs := []any{slog.String("kind", kind), slog.Duration("duration", js.Finished.Sub(js.Started).Round(time.Millisecond))}
	if id != 0 {
		attrs = append(attrs, slog.Int64("id", id))
	}
	switch {
	case interrupted(ctx, err):
		js.Result = "interrupted"
		d.Log.Info("job", append(attrs, slog.String("result", js.Result))...)
	case err != nil:
		js.Result, js.Error = "failed", err.Error()
		d.Log.Error("job", append(attrs, slog.String("result", js.Result), slog.Any("err", err))...)
	default:
		js.Result = "ok"
		d.Log.Info("job", append(attrs, slog.String("result", js.Result))...)
	}
	if ferr != nil {
		d.Log.Error("job", append(attrs, slog.String("result", "not recorded"), slog.Any("err", ferr))...)
	}
	d.mu.Lock()
	d.status.Current, d.status.Last = nil, js
	d.mu.Unlock()
	d.writeStatus()
	return err
}

// interrupted reports whether a job that returned err was stopped by the
// daemon's shutdown rather than finished: a job that completed just before
// the signal counts as finished.
func interrupted(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil
}

func (d *Daemon) protect(ctx context.Context, fn func(context.Context, func(string)) error, progress func(string)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
			d.Log.Error("job panicked", slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
		}
	}()
	return fn(ctx, progress)
}

func (d *Daemon) progress(ctx context.Context, js *JobStatus, text string) {
	d.mu.Lock()
	js.Progress = text
	d.mu.Unlock()
	d.writeStatus()
	if d.Queue != nil && js.ID != 0 {
		if err := d.Queue.SetProgress(ctx, js.ID, text); err != nil && ctx.Err() == nil {
			d.Log.Warn("recording progress", slog.Int64("id", js.ID), slog.Any("err", err))
		}
	}
}

func (d *Daemon) nightlyPending() bool {
	_, err := os.Stat(filepath.Join(d.StateDir, PendingFile))
	return err == nil
}

func (d *Daemon) markNightly(due time.Time) {
	path := filepath.Join(d.StateDir, PendingFile)
	if err := os.WriteFile(path, []byte(due.UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		d.Log.Warn("marking the nightly pass due", slog.Any("err", err))
	}
}

// writeStatus writes StateDir/daemon.json atomically.
func (d *Daemon) writeStatus() {
	d.mu.Lock()
	data, err := json.MarshalIndent(d.status, "", "  ")
	d.mu.Unlock()
	if err != nil {
		return
	}
	path := filepath.Join(d.StateDir, StatusFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		d.Log.Warn("writing the daemon status", slog.Any("err", err))
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		d.Log.Warn("writing the daemon status", slog.Any("err", err))
	}
}

// ReadStatus reads the status a daemon wrote to stateDir, and whether that
// daemon is still running (it holds the daemon lock).
func ReadStatus(stateDir string) (st Status, running bool, err error) {
	data, err := os.ReadFile(filepath.Join(stateDir, StatusFile))
	if errors.Is(err, os.ErrNotExist) {
		return Status{}, false, nil
	}
	if err != nil {
		return Status{}, false, fmt.Errorf("reading the daemon status: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return Status{}, false, fmt.Errorf("reading the daemon status %s: %w", filepath.Join(stateDir, StatusFile), err)
	}
	h, held, err := holderOf(filepath.Join(stateDir, DaemonLockFile))
	if err != nil {
		return st, false, err
	}
	return st, held && h.PID == st.PID, nil
}
