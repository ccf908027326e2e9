package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/app/nightly"
	"github.com/pgbisect/pgbisect/store"
)

// Ops run the jobs: *app.App (app.App.RunJob runs a request's operation),
// or a simulation in tests. Each operation must save its state through the
// store as it goes (a bisection does), so a job moved to another machine
// resumes where the last save left it. A post job's error means some
// findings wait: it is retried with backoff.
type Ops interface {
	RunJob(ctx context.Context, j app.Job, r app.Request, sink app.Sink) error
}

// DefaultLeaseTTL is how long a job's lease lasts unless renewed. A dead
// machine's job is taken over within about TTL + TTL/3 (the reaper's
// period) + River's fetch poll: under 5 minutes with the default.
const DefaultLeaseTTL = 2 * time.Minute

// Config is a daemon: one machine of a class, on a results database.
type Config struct {
	Store *store.Store
	Ops   Ops
	// Machine names this machine (MachineName of the host name by
	// default); Class is its class, the queue it works.
	Machine string
	Class   string
	// LeaseTTL is a job lease's lifetime; default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Nightly, when set, schedules a nightly pass for each of
	// NightlyClasses (default: Class). Every daemon should list every class
	// with a nightly pass: River's leader enqueues them all, and unique
	// arguments keep one pass per tick per class.
	Nightly        nightly.Schedule
	NightlyClasses []string
	NightlyRequest app.NightlyRequest
	// Sink gives each job's events a destination (a log file); the
	// returned func is called when the job ends. Default: none.
	Sink func(key string) (app.Sink, func())
	// Log gets the daemon's and River's logs. Default: discarded.
	Log *slog.Logger
	// ReapEvery overrides the reaper's period (default LeaseTTL/3).
	ReapEvery time.Duration
	// NoPosts leaves post jobs to other daemons ('pgbisect daemon
	// --no-post'): they wait in the queue, not swallowed.
	NoPosts bool
}

// Daemon works the queue of its class with River.
type Daemon struct {
	cfg    Config
	client *river.Client[pgx.Tx]

	mu      sync.Mutex
	current string // the key of the job running, "" idle
}

// New checks cfg and makes the daemon's River client.
func New(cfg Config) (*Daemon, error) {
	if cfg.Store == nil || cfg.Store.Pool() == nil || cfg.Ops == nil {
		return nil, errors.New("jobs: a daemon needs a results store and operations")
	}
	if cfg.Machine == "" {
		host, _ := os.Hostname()
		cfg.Machine = MachineName(host)
	}
	if cfg.Class == "" {
		cfg.Class = DefaultClass
	}
	if err := CheckClass(cfg.Class); err != nil {
		return nil, err
	}
	if len(cfg.Machine) > 64 || !queueName.MatchString(cfg.Machine) {
		return nil, fmt.Errorf("machine name %q: use lowercase letters and digits separated by single '-' or '_' (e.g. %s)", cfg.Machine, MachineName(cfg.Machine))
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.ReapEvery <= 0 {
		cfg.ReapEvery = cfg.LeaseTTL / 3
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Sink == nil {
		cfg.Sink = func(string) (app.Sink, func()) { return nil, func() {} }
	}
	if len(cfg.NightlyClasses) == 0 {
		cfg.NightlyClasses = []string{cfg.Class}
	}
	d := &Daemon{cfg: cfg}
	workers := river.NewWorkers()
	for _, k := range jobKinds {
		k.addWorker(workers, d)
	}
	queues := map[string]river.QueueConfig{cfg.Class: {MaxWorkers: 1}}
	if !cfg.NoPosts {
		queues[PostQueue] = river.QueueConfig{MaxWorkers: 1}
	}
	rcfg := &river.Config{
		ID:      cfg.Machine,
		Queues:  queues,
		Workers: workers,
		// Long jobs: no timeout, and River's rescuer (which re-runs any
		// job running longer than this, alive or not) out of the way; the
		// lease reaper moves the jobs of dead machines.
		JobTimeout:           -1,
		RescueStuckJobsAfter: 14 * 24 * time.Hour,
		Logger:               cfg.Log,
	}
	if cfg.Nightly != nil {
		sched := Aligned(cfg.Nightly)
		for _, class := range cfg.NightlyClasses {
			if err := CheckClass(class); err != nil {
				return nil, err
			}
			rcfg.PeriodicJobs = append(rcfg.PeriodicJobs, river.NewPeriodicJob(sched, func() (river.JobArgs, *river.InsertOpts) {
				return NightlyJob(sched, class, time.Now(), cfg.NightlyRequest)
			}, &river.PeriodicJobOpts{ID: "nightly-" + class, RunOnStart: true}))
		}
	}
	client, err := river.NewClient(riverpgxv5.New(cfg.Store.Pool()), rcfg)
	if err != nil {
		return nil, fmt.Errorf("starting the job client: %w", err)
	}
	d.client = client
	return d, nil
}

// Machine is the daemon's machine name.
func (d *Daemon) Machine() string { return d.cfg.Machine }

// Class is the daemon's machine class.
func (d *Daemon) Class() string { return d.cfg.Class }

// Run joins the machine, works jobs, renews the machine's heartbeat and
// reaps expired leases until ctx is done, then stops: the job running is
// cancelled, snoozed (no attempt counted) and its lease released, so
// another machine, or this one restarted, resumes it.
func (d *Daemon) Run(ctx context.Context) error {
	st := d.cfg.Store
	// A name is one daemon's: a live machine of the same name refuses
	// this one; a dead host's (no heartbeat for a lease's time) or a
	// crashed daemon's on this host is taken over.
	host, _ := os.Hostname()
	if err := st.JoinMachine(ctx, store.Machine{Name: d.cfg.Machine, Class: d.cfg.Class, Host: host, PID: os.Getpid()},
		d.cfg.LeaseTTL, processGone); err != nil {
		return err
	}
	if err := d.client.Start(ctx); err != nil {
		return fmt.Errorf("starting the job client: %w", err)
	}
	d.cfg.Log.Info("daemon started", slog.String("machine", d.cfg.Machine), slog.String("class", d.cfg.Class),
		slog.Duration("lease_ttl", d.cfg.LeaseTTL))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.background(ctx)
	}()
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	err := d.client.StopAndCancel(stopCtx)
	wg.Wait()
	if lerr := st.LeaveMachine(stopCtx, d.cfg.Machine); lerr != nil && err == nil {
		err = lerr
	}
	d.cfg.Log.Info("daemon stopped", slog.String("machine", d.cfg.Machine))
	if err != nil {
		return fmt.Errorf("stopping the job client: %w", err)
	}
	return nil
}

// background beats the heartbeat and reaps until ctx is done.
func (d *Daemon) background(ctx context.Context) {
	t := time.NewTicker(d.cfg.ReapEvery)
	defer t.Stop()
	for {
		d.mu.Lock()
		cur := d.current
		d.mu.Unlock()
		if err := d.cfg.Store.Heartbeat(ctx, d.cfg.Machine, cur); err != nil && ctx.Err() == nil {
			d.cfg.Log.Warn("heartbeat", slog.Any("err", err))
		}
		if n, err := Reap(ctx, d.cfg.Store, d.client, d.cfg.LeaseTTL); err != nil && ctx.Err() == nil {
			d.cfg.Log.Warn("reaping expired leases", slog.Any("err", err))
		} else if n > 0 {
			d.cfg.Log.Info("moved jobs of machines whose lease expired", slog.Int("jobs", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// EventsOf is the events stream of job key (store.AppendEvent).
func EventsOf(key string) string { return "job-" + key }

// worker runs the jobs of request type R under a lease.
type worker[R app.Request] struct {
	river.WorkerDefaults[Args[R]]
	d *Daemon
}

// Timeout implements river.Worker: jobs run for hours; none times out.
func (w *worker[R]) Timeout(*river.Job[Args[R]]) time.Duration { return -1 }

// NextRetry implements river.Worker: a post is retried with backoff, a
// minute, doubling, at most an hour. That is GitHub's advice for its
// secondary rate limits (wait at least a minute, then longer); the primary
// limit's reset is waited for by notify's poster within a post. Other
// jobs take River's default.
func (w *worker[R]) NextRetry(job *river.Job[Args[R]]) time.Time {
	if p, _ := app.QueuePolicy(job.Kind); p.Posts {
		return time.Now().Add(PostBackoff(job.Attempt))
	}
	return time.Time{}
}

// Work implements river.Worker.
func (w *worker[R]) Work(ctx context.Context, job *river.Job[Args[R]]) error {
	c := job.Args.Common
	if c.Key == "" {
		c.Key = fmt.Sprintf("%s-%d", job.Kind, job.ID)
	}
	if c.Class == "" {
		c.Class = job.Queue
	}
	d := w.d
	j := app.Job{Events: EventsOf(c.Key), NoPosts: d.cfg.NoPosts, Enqueue: func(ctx context.Context, r app.Request) error {
		args, opts, err := NewArgs(r, c.Class)
		if err == nil {
			_, err = d.client.Insert(ctx, args, opts)
		}
		return err
	}}
	return d.leased(ctx, job.Kind, job.ID, c, func(ctx context.Context, sink app.Sink) error {
		return d.cfg.Ops.RunJob(ctx, j, job.Args.Request, sink)
	})
}

// PostBackoff is the wait before a post's next attempt after attempt
// (1-based) failed.
func PostBackoff(attempt int) time.Duration {
	return min(time.Minute<<min(max(attempt-1, 0), 6), time.Hour)
}

// leased runs fn under the job's lease: taken first (a live holder elsewhere
// snoozes this row), renewed every TTL/3, put in fn's context for the
// store's fenced writes; fn's context is cancelled when the lease is lost.
func (d *Daemon) leased(ctx context.Context, kind string, id int64, c Common, fn func(context.Context, app.Sink) error) error {
	st := d.cfg.Store
	log := d.cfg.Log.With(slog.String("kind", kind), slog.String("key", c.Key), slog.Int64("river_id", id))
	// The default class keeps the one-machine setup's nightly series
	// (class "" in the store).
	leaseClass := c.Class
	if leaseClass == DefaultClass {
		leaseClass = ""
	}
	l, err := st.AcquireLease(ctx, c.Key, d.cfg.Machine, leaseClass, d.cfg.LeaseTTL)
	if errors.Is(err, store.ErrLeaseHeld) {
		log.Info("job", slog.String("result", "held elsewhere"), slog.Any("err", err))
		return river.JobSnooze(d.cfg.LeaseTTL)
	}
	if err != nil {
		return err
	}
	d.setCurrent(c.Key)
	defer d.setCurrent("")
	if err := st.Heartbeat(ctx, d.cfg.Machine, c.Key); err != nil {
		log.Warn("heartbeat", slog.Any("err", err))
	}
	jctx, cancel := context.WithCancelCause(store.WithLease(ctx, l))
	defer cancel(nil)
	kctx, stopKeep := context.WithCancel(ctx)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		st.KeepLease(kctx, l, d.cfg.LeaseTTL, func(err error) { cancel(err) })
	}()
	sink, closeSink := d.cfg.Sink(c.Key)
	started := time.Now()
	log.Info("job started", slog.Int64("epoch", l.Epoch))
	err = protect(jctx, fn, sink, log)
	closeSink()
	stopKeep()
	<-kept
	attrs := []any{slog.Duration("duration", time.Since(started).Round(time.Millisecond))}
	lost := context.Cause(jctx)
	switch {
	case lost != nil && errors.Is(lost, store.ErrLeaseLost) || errors.Is(err, store.ErrLeaseLost):
		// The lease expired unrenewed (the store was away for longer
		// than the TTL) and nobody took the job: this row goes back to
		// the queue, as on a shutdown. Cancelled, it would be lost: the
		// reaper moves only running rows.
		if ok, herr := st.HandBackLease(context.WithoutCancel(ctx), l); herr == nil && ok {
			log.Warn("job", append(attrs, slog.String("result", "lease expired, handed back"), slog.Any("err", lost))...)
			return river.JobSnooze(time.Second)
		} else if herr != nil {
			log.Warn("job", slog.String("handing back the lease", herr.Error()))
		}
		// Another machine has (or will have) the job: this row ends
		// cancelled, and the lease is not ours to release.
		log.Warn("job", append(attrs, slog.String("result", "lease lost"), slog.Any("err", lost))...)
		return river.JobCancel(fmt.Errorf("lease lost: %v", lost))
	case ctx.Err() != nil:
		// A clean shutdown: hand the job back without counting an attempt.
		log.Info("job", append(attrs, slog.String("result", "interrupted"))...)
		rerr := st.ReleaseLease(context.WithoutCancel(ctx), l)
		if rerr != nil {
			log.Warn("releasing the lease", slog.Any("err", rerr))
		}
		return river.JobSnooze(0)
	}
	if rerr := st.ReleaseLease(ctx, l); rerr != nil {
		log.Warn("releasing the lease", slog.Any("err", rerr))
	}
	switch {
	case errors.Is(err, app.ErrBadRequest):
		log.Error("job", append(attrs, slog.String("result", "failed"), slog.Any("err", err))...)
		return river.JobCancel(err) // asking again gives the same answer
	case err != nil:
		log.Error("job", append(attrs, slog.String("result", "failed"), slog.Any("err", err))...)
		return err
	}
	log.Info("job", append(attrs, slog.String("result", "ok"))...)
	return nil
}

func (d *Daemon) setCurrent(key string) {
	d.mu.Lock()
	d.current = key
	d.mu.Unlock()
}

// protect runs fn, recovering a panic into an error.
func protect(ctx context.Context, fn func(context.Context, app.Sink) error, sink app.Sink, log *slog.Logger) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
			log.Error("job panicked", slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
		}
	}()
	return fn(ctx, sink)
}

// processGone reports whether no process has pid on this host.
func processGone(pid int) bool {
	return pid > 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
