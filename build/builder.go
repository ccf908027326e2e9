package build

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// Builder builds commits of one repository with one set of options into
// the build cache under a state directory:
//
//	stateDir/worktrees/<options hash>-<major>/
//	                                     a persistent worktree per tree options (ForTree)
//	                                     and major release: src/ (pgbisect's) built in
//	                                     build/ (BuildAs's)
//	stateDir/builds/<key>/               one install per key (bin/, lib/, share/)
//	stateDir/builds/.tmp/<key>/          an install being made (renamed into place)
//	stateDir/builds/.failed/<key>.json   a recorded build failure
//	stateDir/builds/.locks/<key>.lock    per-key locks (the worktree's is beside it)
//	stateDir/logs/                       build logs
//	stateDir/ccache/                     ccache's cache, shared by all worktrees (BuildAs's)
//
// Builders in several processes may share a state directory: the worktree
// and every key are protected by file locks.
type Builder struct {
	repo     *Repo
	stateDir string
	opts     Options
	progress io.Writer
	log      *slog.Logger

	// BuildAs is the user that configure, make and make install run as
	// when pgbisect is root: the commit being built is arbitrary code.
	// The application sets it to run_as, the user the built server runs
	// as anyway. nil, or pgbisect not root: they run as pgbisect's own
	// user. See owner.go and docs/build.md.
	BuildAs *proc.User

	// Retry makes Build try again a commit that failed before, instead of
	// returning the recorded failure.
	Retry bool

	// Timeout bounds the work of one build (checkout, configure, make,
	// install), not the wait for another process's lock on the same
	// worktree or key. A build that runs out of it is stopped with its
	// process group and returns a *TimeoutError; the commit is not
	// recorded as broken. 0: no limit (NewBuilder's callers set the
	// config's build.timeout, default 1h).
	Timeout time.Duration

	// Record, when set, is told the outcome of every Build that got as far
	// as the cache: the commit's key with the install (a cache hit or a new
	// build) or with the *Error of a build that failed. The results store
	// keeps its builds table with it. It must not block for long.
	Record func(ctx context.Context, key Key, inst *Install, failure *Error)

	mu      sync.Mutex
	memo    map[string]string // commit -> source commit of its key
	toolsOK bool
	mesonOK bool // meson and ninja were found
}

// NewBuilder returns a builder. progress receives human-readable progress
// lines (nil: none); log receives structured logs (nil: discarded).
func NewBuilder(repo *Repo, stateDir string, opts Options, progress io.Writer, log *slog.Logger) *Builder {
	if progress == nil {
		progress = io.Discard
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// configure is run by its absolute path from the build directory.
	if abs, err := filepath.Abs(stateDir); err == nil {
		stateDir = abs
	}
	return &Builder{repo: repo, stateDir: stateDir, opts: opts, progress: progress, log: log, memo: map[string]string{}}
}

// Options returns the builder's options.
func (b *Builder) Options() Options { return b.opts }

// Key returns the build key of a commit (anything Resolve accepts). A commit
// that touches only NoCompile paths has its parent's key, recursively, and
// SameAsParent set.
func (b *Builder) Key(ctx context.Context, hash string) (Key, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return keyFor(ctx, b.repo, hash, b.opts, b.memo)
}

// Install is one cached build.
type Install struct {
	Key      string        // Key.ID
	Commit   string        // full hash of the commit whose tree was built (Key.Source)
	Subject  string        // that commit's subject
	Options  Options       // the options it was built with
	Prefix   string        // the install directory (bin/, lib/, share/ below it)
	BuiltAt  time.Time     // when the build finished
	Duration time.Duration // how long it took
	Size     int64         // bytes on disk
}

// BinDir is the directory of postgres, initdb, pg_ctl, psql and pgbench.
func (i *Install) BinDir() string { return filepath.Join(i.Prefix, "bin") }

func (b *Builder) buildsDir() string { return filepath.Join(b.stateDir, "builds") }
func (b *Builder) locksDir() string  { return filepath.Join(b.stateDir, "builds", ".locks") }
func (b *Builder) failedDir() string { return filepath.Join(b.stateDir, "builds", ".failed") }
func (b *Builder) tmpDir() string    { return filepath.Join(b.stateDir, "builds", ".tmp") }
func (b *Builder) logsDir() string   { return filepath.Join(b.stateDir, "logs") }
func (b *Builder) ccacheDir() string { return filepath.Join(b.stateDir, "ccache") }
func (b *Builder) prefix(id string) string {
	return filepath.Join(b.buildsDir(), id)
}

// worktreeFor is the worktree of builds of a tree with options o (the
// tree's options, see Options.ForTree): one per options and major release
// ("d312153951a9-15"), so that trees needing other flags or meson, and
// trees of another release (a bisection across releases, tests of 13, 15
// and 18 sharing a state directory, nightly runs of back branches), do not
// make each other reconfigure and rebuild everything. A tree whose version
// is unknown gets the options' worktree alone.
func (b *Builder) worktreeFor(o Options, t Tree) *worktree {
	name := o.Hash()
	if t.Version.Num != 0 {
		name += "-" + t.Version.Major()
	}
	return &worktree{dir: filepath.Join(b.stateDir, "worktrees", name)}
}
