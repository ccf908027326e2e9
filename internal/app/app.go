// Package app is pgbisect's one wiring point: it holds the results store,
// the repository, the builder, the benchmark runner's settings, the machine
// lock and the logger, and offers the operations (Bisect, Compare, Run,
// Nightly, Deliver) as function calls that take a typed, JSON-serialisable
// request and report progress as typed events. The command line, the daemon
// and anything that starts work from elsewhere (a web page, a GitHub
// comment) call these; none of them wires build, bench, bisect, store and
// notify together itself.
//
// The design choice that matters: an App is opened from plain component
// options (Options), never from the config file's type, and never changes
// them. A request carries everything that varies per operation, so one App
// serves any number of operations one after another, the daemon's included,
// without copies of the config or a lock around them.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/base/machinelock"
	"github.com/pgbisect/pgbisect/internal/base/pgcluster"
	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/base/redact"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store"
)

// Options are the parts an App is made of, each in its component's own
// terms; internal/front/cli fills them from the config file and the flags.
type Options struct {
	// StateDir holds builds, clusters, reports and logs (absolute).
	StateDir string
	// Machine names this machine on a bisection's samples when no job
	// lease names it: the name a daemon here would take, so that a
	// bisection started by hand and resumed by this host's daemon has not
	// moved. Default: the host name.
	Machine string
	// Repo is the PostgreSQL repository: a directory (absolute) or a URL.
	Repo string
	// Branch is the branch nightly passes follow and fetches fetch.
	Branch string
	// DB is the results database URL; empty: a private cluster under
	// StateDir.
	DB string
	// RunAs is the unprivileged user servers run as when pgbisect is root.
	RunAs string
	// DBRunAs is the user the private results cluster runs as (default
	// "pgbisect"): another user than RunAs, so that no benchmark server,
	// scenario SQL or shell step can reach the results store.
	DBRunAs string
	// Build are the build options; BuildTimeout bounds every build.
	Build        build.Options
	BuildTimeout time.Duration
	// ClientBin is the default directory of pgbench and psql (bench.client_bin).
	ClientBin string
	// KeepClusters keeps cluster directories (bench.keep_clusters).
	KeepClusters bool
	// Stats is the config file's stats section, layered over each
	// operation's default thresholds.
	Stats stats.Overlay
	// GitHub is where findings are posted (Token from GITHUB_TOKEN).
	GitHub notify.GitHubOptions
	// Nightly lists the nightly suite's scenario files (absolute).
	Nightly []string
	// Scenarios are the scenarios a request may name instead of giving a
	// file (every queued request does).
	Scenarios Scenarios
	// Log gets structured logs. Default: discarded.
	Log *slog.Logger
}

// App is an opened set of components. Its methods run one operation each;
// they may be called one after another from one goroutine (the machine
// lock serialises operations across processes anyway).
type App struct {
	opts Options
	log  *slog.Logger

	// results is the results store, opened on first use; owned says
	// whether Close closes it.
	results *store.Store
	owned   bool

	// builder and repo are the repository's, opened on first use: a daemon
	// must start (and take requests) even when the repository cannot be
	// reached at boot.
	mu       sync.Mutex
	repo     *build.Repo
	builder  *build.Builder
	buildOut *lineWriter // the builder's progress, to the current operation's sink
}

// Open returns an App for opts. The results store, when given, is used as
// it is and not closed by Close; otherwise it is opened on first use.
func Open(ctx context.Context, opts Options, results *store.Store) (*App, error) {
	if opts.StateDir == "" {
		return nil, errors.New("app: a state directory is required")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Branch == "" {
		opts.Branch = "master"
	}
	return &App{opts: opts, log: opts.Log, results: results}, nil
}

// Close lets go of what the App opened.
func (a *App) Close() {
	if a.owned && a.results != nil {
		a.results.Close()
		a.results = nil
	}
}

// Options returns the options the App was opened with.
func (a *App) Options() Options { return a.opts }

// Store returns the results store, opening it (and starting the private
// cluster) the first time.
func (a *App) Store(ctx context.Context) (*store.Store, error) {
	if a.results != nil {
		return a.results, nil
	}
	if err := os.MkdirAll(a.opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	st, err := store.Open(ctx, store.Config{URL: a.opts.DB, StateDir: a.opts.StateDir, RunAs: a.opts.DBRunAs, Log: a.log})
	if err != nil {
		return nil, err
	}
	a.results, a.owned = st, true
	return st, nil
}

// StoreName names the results store in messages.
func (a *App) StoreName() string { return StoreName(a.opts.DB) }

// StoreName names the results store of a database URL in messages, with
// any password hidden.
func StoreName(url string) string {
	if url == "" {
		return "the private results cluster"
	}
	return RedactURL(url)
}

// RedactURL hides a password in a connection string, in every form
// (internal/base/redact).
func RedactURL(u string) string { return redact.String(u) }

// ErrUnmeasurable is matched (errors.Is) by the error of an operation
// that failed because a target built but could not be measured: initdb,
// the server's start, a setup or workload step failed, or the server
// crashed (bench.MeasureError). 'compare --exit-code' skips such a commit.
var ErrUnmeasurable = bench.ErrUnmeasurable

// Builder returns the builder of the App's repository, opening (or
// cloning) it the first time. Clone and build progress go to sink as
// build-step events. A failure is not kept: the next call tries again.
func (a *App) Builder(ctx context.Context, sink Sink) (*build.Builder, *build.Repo, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.builder != nil {
		a.buildOut.set(sink)
		return a.builder, a.repo, nil
	}
	w := newLineWriter(sink, KindBuildStep)
	b, repo, err := a.openBuilder(ctx, a.opts.Repo, w)
	if err != nil {
		return nil, nil, err
	}
	a.builder, a.repo, a.buildOut = b, repo, w
	return b, repo, nil
}

// openBuilder opens the repository at source with a builder of the App's
// options; the builder records its builds in the results store when it is
// open.
func (a *App) openBuilder(ctx context.Context, source string, w io.Writer) (*build.Builder, *build.Repo, error) {
	repo, err := build.Open(ctx, source, a.opts.StateDir, w)
	if err != nil {
		return nil, nil, err
	}
	b := build.NewBuilder(repo, a.opts.StateDir, a.opts.Build, w, a.log)
	// The commits built are arbitrary code: as root, they are built as
	// run_as, the user their servers run as anyway (never db_run_as).
	if proc.IsRoot() {
		if b.BuildAs, err = a.runAs(); err != nil {
			return nil, nil, err
		}
	}
	// Every build of every operation is bounded.
	b.Timeout = a.opts.BuildTimeout
	if a.results != nil {
		recordBuilds(b, a.results, a.log)
	}
	return b, repo, nil
}

// resolve resolves rev in repo, fetching the App's branch once when repo
// has a remote and rev is not known yet (a clone may simply be behind).
func (a *App) resolve(ctx context.Context, repo *build.Repo, rev string, sink Sink) (build.Commit, error) {
	c, err := repo.Resolve(rev)
	if err != nil && repo.Remote() != "" {
		sink.note("%v; fetching %s from %s", err, a.opts.Branch, repo.Remote())
		if ferr := repo.Fetch(ctx, a.opts.Branch); ferr != nil {
			return c, ferr
		}
		c, err = repo.Resolve(rev)
	}
	return c, err
}

// newRunner returns a benchmark runner with the App's settings, its pgbench
// and psql from clientBin.
func (a *App) newRunner(clientBin string, keep bool, progress io.Writer, log *slog.Logger) (*bench.Runner, error) {
	if err := os.MkdirAll(a.opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	r := &bench.Runner{StateDir: a.opts.StateDir, ClientBin: clientBin, Progress: progress, Log: log,
		KeepClusters: keep || a.opts.KeepClusters}
	if proc.IsRoot() {
		var err error
		if r.RunAs, err = a.runAs(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// runAs looks up run_as, the user builds and benchmark servers run as when
// pgbisect is root, and refuses it when it runs a PostgreSQL server
// pgbisect did not make (pgcluster.CheckBenchUser): a pull request's code
// built and served as that user could reach that server's databases.
func (a *App) runAs() (*proc.User, error) {
	u, err := proc.LookupUser(a.opts.RunAs)
	if err != nil {
		return nil, err
	}
	if err := pgcluster.CheckBenchUser(u); err != nil {
		return nil, err
	}
	return u, nil
}

// SweepStrays removes the clusters (stopping their servers) and puts back
// the OS settings that a dead process of this state directory left behind
// (bench.Runner.Sweep). A daemon calls it when it starts.
func (a *App) SweepStrays(ctx context.Context) error {
	r, err := a.newRunner("", false, nil, a.log)
	if err != nil {
		return err
	}
	defer r.Close(context.WithoutCancel(ctx))
	return r.Sweep()
}

// LockMachine takes the machine lock, so that builds and benchmarks of
// this and other processes never overlap. When another process holds it,
// it says who in a note and waits for them with wait, refuses without.
func (a *App) LockMachine(ctx context.Context, wait bool, sink Sink) (func(), error) {
	if err := os.MkdirAll(a.opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	unlock, err := machinelock.Lock(ctx, machinelock.Path(a.opts.StateDir), false)
	var busy *machinelock.BusyError
	if errors.As(err, &busy) && wait {
		sink.note("waiting for the machine: %s is using it", busy.Holder)
		return machinelock.Lock(ctx, machinelock.Path(a.opts.StateDir), true)
	}
	return unlock, err
}

// recordBuilds makes b keep the builds table of st: every build it makes or
// finds in its cache, and every failure. A store that cannot be written is
// warned about, not fatal: the build itself is fine.
func recordBuilds(b *build.Builder, st *store.Store, log *slog.Logger) {
	b.Record = func(ctx context.Context, key build.Key, inst *build.Install, failure *build.Error) {
		opts, _ := json.Marshal(b.Options())
		rec := store.Build{Key: key.ID, Commit: key.Source, Options: opts}
		if failure != nil {
			rec.Status, rec.LogPath, rec.Error = "failed", failure.LogPath, failure.Tail
		} else {
			rec.Status, rec.Duration, rec.Time = "ok", inst.Duration, inst.BuiltAt
		}
		if err := st.RecordBuild(ctx, rec); err != nil {
			log.Warn("not recorded in the results store", slog.String("build", key.ID), slog.Any("err", err))
		}
	}
}
