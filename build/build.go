package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/gofrs/flock"
)

// installPrefix is the --prefix every build is configured with. Installs go
// to DESTDIR=<tmp>, so they land in <tmp>/pgbisect and are renamed into the
// cache in one step. PostgreSQL finds share/ and lib/ relative to bin/, and
// the binaries' rpath is $ORIGIN-relative, so an install works wherever it
// is moved.
const installPrefix = "/pgbisect"

// rpathdir makes binaries find libpq beside them (bin/../lib) and shared
// libraries find it in their own directory; "$$" is make's escape for "$".
const rpathdir = "rpathdir=$$ORIGIN/../lib:$$ORIGIN/.."

// lockPoll is how often a waiting builder retries a held lock.
const lockPoll = 250 * time.Millisecond

// configureInputs are the paths whose content decides configure's output.
// Their tree hashes, with the options, are compared with those configure
// last ran with. meson's files are not among them: configure never reads
// them, and counting them re-ran configure (and rebuilt everything after
// it) on a real 25-commit window whose only build-system change was to
// meson.build (72740099, "meson: fix openssl detection issues").
var configureInputs = []string{
	"configure", "configure.ac", "configure.in", "aclocal.m4", "config",
	"GNUmakefile.in", "src/Makefile.global.in", "src/Makefile.shlib",
	"src/include/pg_config.h.in", "src/include/pg_config_ext.h.in",
	"src/interfaces/ecpg/include/ecpg_config.h.in", "src/template", "src/makefiles",
}

// Build returns the install of a commit (anything Resolve accepts), building
// it when its key is not in the cache. A cache hit does no work and takes
// no lock. A commit that failed to build before returns the recorded
// *Error at once unless b.Retry is set. When ctx is cancelled the build
// stops, its processes are killed and the cache is left as it was.
func (b *Builder) Build(ctx context.Context, hash string) (*Install, error) {
	key, err := b.Key(ctx, hash)
	if err != nil {
		return nil, err
	}
	inst, err := b.buildKey(ctx, hash, key)
	if b.Record != nil {
		var be *Error
		if errors.As(err, &be) || err == nil {
			b.Record(ctx, key, inst, be)
		}
	}
	return inst, err
}

func (b *Builder) buildKey(ctx context.Context, hash string, key Key) (*Install, error) {
	if inst, ok := b.readInstall(key.ID); ok {
		b.log.Debug("build cache hit", slog.String("commit", Short(hash)), slog.String("key", key.ID))
		return inst, nil
	}
	if !b.Retry {
		if e, ok := b.readFailure(key.ID); ok {
			return nil, e
		}
	}
	tree, err := readTree(b.repo, key.Source)
	if err != nil {
		return nil, err
	}
	o := b.opts.ForTree(tree)
	if err := b.preflight(ctx, o); err != nil {
		return nil, err
	}
	wt := b.worktreeFor(o, tree)
	for _, d := range []string{b.locksDir(), b.failedDir(), b.tmpDir(), b.logsDir(), filepath.Dir(wt.dir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
	}
	unlock, err := b.lock(ctx, filepath.Join(b.locksDir(), key.ID+".lock"), "build "+Short(key.Source))
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another process may have built it while we waited.
	if inst, ok := b.readInstall(key.ID); ok {
		return inst, nil
	}
	if !b.Retry {
		if e, ok := b.readFailure(key.ID); ok {
			return nil, e
		}
	}
	b.cleanStaleTmp()
	unlockWT, err := b.lock(ctx, wt.dir+".lock", "the worktree "+wt.dir)
	if err != nil {
		return nil, err
	}
	defer unlockWT()
	if n := killStrays(wt.dir); n > 0 {
		fmt.Fprintf(b.progress, "killed %d processes left running in %s by an earlier pgbisect\n", n, wt.dir)
		b.log.Warn("killed stray build processes", slog.Int("count", n), slog.String("worktree", wt.dir))
	}

	inst, err := b.buildTimed(ctx, key, tree, o, wt)
	var be *Error
	if errors.As(err, &be) {
		b.recordFailure(key.ID, be)
	}
	return inst, err
}

// buildTimed runs build within b.Timeout, turning the deadline into a
// *TimeoutError that says which setting to raise.
func (b *Builder) buildTimed(ctx context.Context, key Key, tree Tree, o Options, wt *worktree) (*Install, error) {
	if b.Timeout <= 0 {
		return b.build(ctx, key, tree, o, wt)
	}
	te := &TimeoutError{Commit: key.Source, Timeout: b.Timeout}
	tctx, cancel := context.WithTimeoutCause(ctx, b.Timeout, te)
	defer cancel()
	inst, err := b.build(tctx, key, tree, o, wt)
	if err != nil && ctx.Err() == nil && context.Cause(tctx) == error(te) {
		return nil, te
	}
	return inst, err
}

// preflight checks, once per builder and build system, that the tools are
// there and that the state directory will be reachable by an unprivileged
// server user, and makes the ccache directory the build user's.
func (b *Builder) preflight(ctx context.Context, o Options) error {
	b.mu.Lock()
	ok := b.toolsOK && (!o.Meson || b.mesonOK)
	b.mu.Unlock()
	if ok {
		return nil
	}
	if err := checkTools(ctx, o); err != nil {
		return err
	}
	if err := os.MkdirAll(b.stateDir, 0o755); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if err := checkReachable(b.stateDir); err != nil {
		return err
	}
	// ccache runs as the build user. An earlier pgbisect (or one with
	// another run_as) left files of root's in it: they become the build
	// user's, so that ccache can update them.
	if err := os.MkdirAll(b.ccacheDir(), 0o755); err != nil {
		return fmt.Errorf("ccache directory: %w", err)
	}
	if err := chownTree(b.ccacheDir(), b.BuildAs); err != nil {
		return fmt.Errorf("ccache directory: %w", err)
	}
	b.mu.Lock()
	b.toolsOK = true
	b.mesonOK = b.mesonOK || o.Meson
	b.mu.Unlock()
	return nil
}

// lock takes an exclusive file lock, telling the user when it has to wait.
func (b *Builder) lock(ctx context.Context, path, what string) (func(), error) {
	l := flock.New(path)
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", what, err)
	}
	if !ok {
		fmt.Fprintf(b.progress, "waiting for another pgbisect process using %s\n", what)
		if ok, err = l.TryLockContext(ctx, lockPoll); err != nil || !ok {
			return nil, fmt.Errorf("waiting for the lock on %s: %w", what, err)
		}
	}
	return func() { _ = l.Unlock() }, nil
}

// build does the work with the tree's options o, holding the key and
// worktree locks.
func (b *Builder) build(ctx context.Context, key Key, tree Tree, o Options, wt *worktree) (_ *Install, err error) {
	commit, err := b.repo.Commit(key.Source)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(b.logsDir(), fmt.Sprintf("%s-%s-%s.log", commit.Short(), o.Hash(), time.Now().UTC().Format("20060102T150405.000")))
	s, err := newSession(commit.Hash, logPath, b.progress, b.BuildAs)
	if err != nil {
		return nil, err
	}
	defer func() {
		// A build stopped by Timeout says so, with its log.
		var te *TimeoutError
		if err != nil && errors.As(context.Cause(ctx), &te) {
			te.LogPath = logPath
		}
	}()
	defer s.close()
	start := time.Now()
	b.log.Info("building", slog.String("commit", commit.Short()), slog.String("key", key.ID), slog.String("log", logPath))
	fmt.Fprintf(s.log, "pgbisect build of %s %q\nversion: %s\noptions: %s\nkey: %s\n", commit.Hash, commit.Subject, treeVersionText(tree), o, key.ID)
	if o.Meson && !b.opts.Meson {
		s.note("the tree has no configure script: building with meson")
	}
	if o.CompatCFLAGS != "" {
		s.note("PostgreSQL %s: adding %s for today's compiler", treeVersionText(tree), o.CompatCFLAGS)
	}

	prev := wt.state()
	fresh, err := b.compile(ctx, s, wt, commit.Hash, o)
	var be *Error
	if errors.As(err, &be) && !fresh {
		// Incremental builds can fail for reasons of their own (stale
		// generated files, dependency tracking gaps): only a clean build
		// may call a commit broken.
		s.note("incremental build failed in %s; retrying from a clean worktree", be.Phase)
		b.log.Warn("incremental build failed, retrying clean", slog.String("commit", commit.Short()), slog.String("phase", be.Phase))
		s.cleaned = true
		if err := b.clean(ctx, s, wt, o); err != nil {
			return nil, err
		}
		_, err = b.compile(ctx, s, wt, commit.Hash, o)
	}
	if err != nil {
		return nil, err
	}
	installStart := time.Now()
	inst, err := b.install(ctx, s, wt, key, commit, start, o, prev)
	if err != nil {
		return nil, err
	}
	st := wt.state()
	st.Built, st.InstallStarted = commit.Hash, installStart
	_ = wt.saveState(st)
	s.note("installed in %s (%s)", inst.Prefix, round(inst.Duration))
	b.log.Info("built", slog.String("commit", commit.Short()), slog.String("prefix", inst.Prefix), slog.Duration("duration", inst.Duration))
	return inst, nil
}

// clean prepares a clean rebuild: every tracked file is checked against
// git and written again where it differs (the build user cannot write the
// source, but pgbisect before out-of-tree builds could) and the build
// products are removed, but configure's results are kept when its
// inputs have not changed, since configure is the slowest step on small
// machines. If cleaning fails the worktree is recreated from nothing.
func (b *Builder) clean(ctx context.Context, s *session, wt *worktree, o Options) error {
	s.setPhase("clean")
	if err := wt.rewriteAll(); err == nil {
		var cerr error
		if o.Meson {
			cerr = s.run(ctx, "clean", wt.mesonBuild(), b.env(), "ninja", "clean")
		} else {
			cerr = s.run(ctx, "clean", wt.build(), b.env(), "make", "clean")
		}
		if cerr == nil {
			return nil
		}
		if ctx.Err() != nil {
			return cerr
		}
	}
	s.note("cleaning failed; recreating the worktree")
	if err := wt.reset(); err != nil {
		return fmt.Errorf("recreating worktree %s: %w", wt.dir, err)
	}
	return nil
}

// compile checks out commit in the worktree, configures when needed and
// compiles. fresh reports whether it started from an empty worktree (so a
// failure cannot be blamed on leftovers).
func (b *Builder) compile(ctx context.Context, s *session, wt *worktree, commit string, o Options) (fresh bool, err error) {
	s.setPhase("checkout")
	if migrated, err := wt.migrate(); err != nil {
		return false, fmt.Errorf("moving worktree %s to out-of-tree builds: %w", wt.dir, err)
	} else if migrated {
		s.note("the worktree was built in place by an earlier pgbisect: its source is written afresh and built out of tree from now on")
	}
	st := wt.state()
	if _, err := os.Stat(wt.manifestPath()); err != nil {
		// A new source; fresh only if no build tree is left either
		// (a migrated worktree keeps its build tree).
		fresh = !exists(filepath.Join(wt.build(), "config.status")) && !exists(filepath.Join(wt.mesonBuild(), "build.ninja"))
		st = worktreeState{}
	}
	st.Layout = layoutVPATH
	n, err := wt.checkout(ctx, b.repo, commit)
	if err != nil {
		return fresh, err
	}
	s.note("checkout wrote or removed %d files", n)
	st.Commit = commit
	if err := wt.saveState(st); err != nil {
		return fresh, err
	}
	if o.Meson {
		return fresh, b.compileMeson(ctx, s, wt, commit, o)
	}
	if _, err := os.Stat(filepath.Join(wt.src(), "configure")); err != nil {
		return fresh, &Error{Commit: commit, Phase: "configure", LogPath: s.logPath, Tail: "no configure script in this tree\n",
			Err: errors.New("the tree has no configure script: build it with meson (build.meson: true)")}
	}
	removed, err := ownedDir(wt.build(), b.BuildAs)
	if err != nil {
		return fresh, fmt.Errorf("build directory: %w", err)
	}
	if removed {
		s.note("%s belonged to another user than the one builds run as: removed, configuring afresh", wt.build())
	}
	cfg, err := b.configHash(commit, o)
	if err != nil {
		return fresh, err
	}
	if st.Configured != cfg || !exists(filepath.Join(wt.build(), "config.status")) || !exists(filepath.Join(wt.build(), "src", "Makefile.global")) {
		s.setPhase("configure")
		st.Configured = ""
		if err := wt.saveState(st); err != nil {
			return fresh, err
		}
		s.configured = true
		c := configureCommand(wt, o, ccache())
		if err := s.run(ctx, "configure", c.dir, b.env(), c.name, c.args...); err != nil {
			return fresh, err
		}
		st.Configured = cfg
		if err := wt.saveState(st); err != nil {
			return fresh, err
		}
	}
	dirs, err := makeDirs(wt.src(), o)
	if err != nil {
		return fresh, &Error{Commit: commit, Phase: "make", LogPath: s.logPath, Tail: err.Error() + "\n", Err: err}
	}
	s.setPhase("make")
	for _, c := range makeCommands(wt, o, dirs) {
		if err := s.run(ctx, "make", c.dir, b.env(), c.name, c.args...); err != nil {
			return fresh, err
		}
	}
	return fresh, nil
}

// command is a build command: what runs, with which arguments, where.
type command struct {
	dir  string
	name string
	args []string
}

// configureCommand is the configure of a VPATH build: the source's
// configure script run in the build directory, so that nothing is written
// into the source. cc is the ccache command ("" without ccache).
func configureCommand(wt *worktree, o Options, cc string) command {
	args := []string{"--prefix=" + installPrefix, "--enable-depend"}
	args = append(args, o.Configure...)
	if cflags := o.configureCFLAGS(); cflags != "" {
		args = append(args, "CFLAGS="+cflags)
	}
	if cc != "" {
		args = append(args, "CC="+cc+" gcc")
	}
	return command{dir: wt.build(), name: filepath.Join(wt.src(), "configure"), args: args}
}

// makeCommand compiles in the build directory.
func makeCommand(wt *worktree, o Options) command {
	return command{dir: wt.build(), name: "make", args: []string{"-j", fmt.Sprint(o.jobs()), rpathdir}}
}

// makeCommands are the makes of a configure build: at the top when o.All
// or when dirs is nil (a tree without PostgreSQL's layout),
// then in each of dirs (makeDirs), one after the other.
func makeCommands(wt *worktree, o Options, dirs []string) []command {
	return inDirs(makeCommand(wt, o), o.All || dirs == nil, dirs)
}

// installCommands are the make installs of a full install below destdir,
// in the directories makeCommands made.
func installCommands(wt *worktree, o Options, destdir string, dirs []string) []command {
	if o.Meson {
		return []command{installCommand(wt, o, destdir)}
	}
	return inDirs(installCommand(wt, o, destdir), o.All || dirs == nil, dirs)
}

// inDirs is c run at the top of the build tree (when top) and then in
// each of dirs.
func inDirs(c command, top bool, dirs []string) []command {
	var cs []command
	if top {
		cs = append(cs, c)
	}
	for _, d := range dirs {
		cd := c
		cd.dir = filepath.Join(c.dir, filepath.FromSlash(d))
		cs = append(cs, cd)
	}
	return cs
}

// installCommand installs the build below destdir (DESTDIR), which
// receives installPrefix's tree.
func installCommand(wt *worktree, o Options, destdir string) command {
	if o.Meson {
		return command{dir: wt.mesonBuild(), name: "meson", args: []string{"install", "--no-rebuild", "--quiet", "--destdir", destdir}}
	}
	return command{dir: wt.build(), name: "make", args: []string{"-j", fmt.Sprint(o.jobs()), "install", "DESTDIR=" + destdir, rpathdir}}
}

// partialInstallCommand runs make install in one directory of the build
// tree (dir, relative and slash-separated), taking its target all and its
// products as made (make -o): the build's make has just made everything.
func partialInstallCommand(wt *worktree, o Options, destdir, dir string, products []string) command {
	c := installCommand(wt, o, destdir)
	c.dir = filepath.Join(c.dir, filepath.FromSlash(dir))
	args := []string{c.args[0], c.args[1], "-o", "all"}
	for _, p := range products {
		if !strings.HasPrefix(p, "-") {
			args = append(args, "-o", p)
		}
	}
	c.args = append(args, c.args[2:]...)
	return c
}

func (b *Builder) compileMeson(ctx context.Context, s *session, wt *worktree, commit string, o Options) error {
	src := wt.src()
	if !exists(filepath.Join(src, "meson.build")) {
		return &Error{Commit: commit, Phase: "meson", LogPath: s.logPath, Tail: "no meson.build in this tree\n",
			Err: errors.New("the tree has no meson.build (PostgreSQL before 16 builds only with configure): set build.meson to false")}
	}
	bdir := wt.mesonBuild()
	removed, err := ownedDir(bdir, b.BuildAs)
	if err != nil {
		return fmt.Errorf("build directory: %w", err)
	}
	if removed {
		s.note("%s belonged to another user than the one builds run as: removed, setting up afresh", bdir)
	}
	if !exists(filepath.Join(bdir, "build.ninja")) {
		s.setPhase("meson setup")
		// libdir=lib: meson's default on Debian is lib/<multiarch>, where
		// the binaries' rpath would not find libpq.
		args := []string{"setup", "--prefix=" + installPrefix, "--libdir=lib", "-Drpath=false"}
		for _, mo := range o.MesonOptions {
			if !strings.HasPrefix(mo, "-") {
				mo = "-D" + mo
			}
			args = append(args, mo)
		}
		if cargs := o.mesonCArgs(); cargs != "" {
			args = append(args, "-Dc_args="+cargs)
		}
		// bdir exists (empty, the build user's); meson setup accepts that.
		args = append(args, bdir, src)
		// The rpath of configure builds (rpathdir): binaries find libpq
		// in bin/../lib, modules in lib/postgresql in their parent.
		env := append(b.env(), "LDFLAGS=-Wl,-rpath,$ORIGIN/../lib:$ORIGIN/..")
		if c := ccache(); c != "" {
			env = append(env, "CC="+c+" gcc")
		}
		if err := s.run(ctx, "meson", wt.dir, env, "meson", args...); err != nil {
			os.RemoveAll(bdir)
			return err
		}
	}
	s.setPhase("ninja")
	return s.run(ctx, "ninja", bdir, b.env(), "ninja", "-j", fmt.Sprint(o.jobs()))
}

// env is the environment of build commands: ccache keeps its cache in the
// state directory, so clean rebuilds and other worktrees reuse objects;
// CCACHE_BASEDIR makes the worktrees' absolute paths relative in ccache's
// hashes, so the same file compiled in two worktrees is one cache entry.
// A build run as another user gets that user's HOME, USER and LOGNAME
// instead of pgbisect's.
func (b *Builder) env() []string {
	env := []string{
		"CCACHE_DIR=" + b.ccacheDir(),
		"CCACHE_BASEDIR=" + filepath.Join(b.stateDir, "worktrees"),
		"LC_ALL=C",
	}
	if u := b.BuildAs; u != nil && dropping(u) {
		env = append(env, "HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name)
	}
	return env
}

// configHash hashes the configure inputs of commit's tree and the options.
func (b *Builder) configHash(commit string, o Options) (string, error) {
	c, err := b.repo.repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return "", err
	}
	tree, err := c.Tree()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "options %s ccache %q\n", o.Hash(), ccache())
	for _, p := range configureInputs {
		e, err := tree.FindEntry(p)
		if err != nil {
			fmt.Fprintf(h, "%s -\n", p)
			continue
		}
		fmt.Fprintf(h, "%s %s %s\n", p, e.Mode, e.Hash)
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// install installs the build into a temporary directory and moves it
// into the cache, so the cache never holds a partial install. The build
// user installs into a staging directory of its own; when that is not
// pgbisect's user, pgbisect copies the staged tree into a directory it
// owns (copyInstall), so no build can change a cached install later.
// An incremental build stages over links to its parent's install and
// installs only what changed (incremental.go); files still linked to the
// parent's are linked, not copied, into the new cache entry.
//
//	builds/.tmp/<key>/          pgbisect's; removed afterwards
//	builds/.tmp/<key>/stage/    DESTDIR, the build user's
//	builds/.tmp/<key>/install/  pgbisect's copy, renamed to builds/<key>
func (b *Builder) install(ctx context.Context, s *session, wt *worktree, key Key, commit Commit, start time.Time, o Options, prev worktreeState) (*Install, error) {
	s.setPhase("install")
	tmp := filepath.Join(b.tmpDir(), key.ID)
	if err := os.RemoveAll(tmp); err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	plan, why := b.planPartial(wt, prev, commit.Hash, o, s)
	if plan == nil {
		s.note("installing everything: %s", why)
	}
	root, size, err := b.stageInstall(ctx, s, wt, o, tmp, plan)
	if err != nil && plan != nil && ctx.Err() == nil {
		s.note("installing only what changed failed (%v); installing everything", err)
		root, size, err = b.stageInstall(ctx, s, wt, o, tmp, nil)
	}
	if err != nil {
		var be *Error
		if errors.As(err, &be) || ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("install of %s: %w", commit.Short(), err)
	}
	inst := &Install{
		Key: key.ID, Commit: commit.Hash, Subject: commit.Subject, Options: o,
		Prefix: b.prefix(key.ID), BuiltAt: time.Now().UTC(), Duration: time.Since(start), Size: size,
	}
	if err := writeInstall(root, inst); err != nil {
		return nil, err
	}
	if err := os.Rename(root, inst.Prefix); err != nil {
		return nil, fmt.Errorf("moving the install of %s into the cache: %w", commit.Short(), err)
	}
	os.Remove(filepath.Join(b.failedDir(), key.ID+".json"))
	return inst, nil
}

// stageInstall installs the build below tmp, everything or (with a plan)
// only what changed, and returns the directory that becomes the cache
// entry, pgbisect's, and its size.
func (b *Builder) stageInstall(ctx context.Context, s *session, wt *worktree, o Options, tmp string, plan *partialInstall) (string, int64, error) {
	stage := filepath.Join(tmp, "stage")
	staged := filepath.Join(stage, strings.TrimPrefix(installPrefix, "/"))
	copied := filepath.Join(tmp, "install")
	for _, d := range []string{stage, copied} {
		if err := os.RemoveAll(d); err != nil {
			return "", 0, err
		}
	}
	parent := ""
	if plan != nil {
		if err := b.installPartial(ctx, s, wt, o, stage, staged, plan); err != nil {
			return "", 0, err
		}
		parent = plan.parent.Prefix
	} else {
		if _, err := ownedDir(stage, b.BuildAs); err != nil {
			return "", 0, err
		}
		var dirs []string
		if !o.Meson {
			var err error
			if dirs, err = makeDirs(wt.src(), o); err != nil {
				return "", 0, err
			}
		}
		for _, c := range installCommands(wt, o, stage, dirs) {
			if err := s.run(ctx, "install", c.dir, b.env(), c.name, c.args...); err != nil {
				return "", 0, err
			}
		}
	}
	if dropping(b.BuildAs) {
		size, err := copyInstall(staged, copied, buildUID(b.BuildAs), parent)
		return copied, size, err
	}
	size, err := makeReadable(staged)
	return staged, size, err
}

// installPartial stages the install of plan: a copy of the parent's
// install made of links, given to the build user (the links stay
// pgbisect's), then make install in each directory whose products changed.
func (b *Builder) installPartial(ctx context.Context, s *session, wt *worktree, o Options, stage, staged string, plan *partialInstall) error {
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return err
	}
	if err := linkInstall(plan.parent.Prefix, staged); err != nil {
		return fmt.Errorf("linking %s's install: %w", Short(plan.parent.Commit), err)
	}
	if err := chownTree(stage, b.BuildAs); err != nil {
		return err
	}
	if len(plan.dirs) == 0 {
		s.note("installing only what changed since %s: nothing did", Short(plan.parent.Commit))
	} else {
		s.note("installing only what changed since %s: make install in %s", Short(plan.parent.Commit), strings.Join(plan.dirs, ", "))
	}
	for _, d := range plan.dirs {
		c := partialInstallCommand(wt, o, stage, d, plan.products[d])
		if err := s.run(ctx, "install", c.dir, b.env(), c.name, c.args...); err != nil {
			return err
		}
	}
	return nil
}

// makeReadable gives directories mode 0755 and files read (and, when
// executable, execute) permission for everyone, so the unprivileged server
// user can use the install, and takes write permission away, so that no
// later build writes into a cached file through a link (incremental.go).
// It returns the install's size in bytes.
func makeReadable(root string) (int64, error) {
	var size int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode().Perm()
		want := (mode | 0o444) &^ 0o222
		if d.IsDir() {
			want = 0o755
		} else {
			size += fi.Size()
			if mode&0o100 != 0 {
				want |= 0o111
			}
		}
		if want != mode {
			return os.Chmod(p, want)
		}
		return nil
	})
	return size, err
}

// cleanStaleTmp removes temporary install directories that no running
// build owns (their key lock is free).
func (b *Builder) cleanStaleTmp() {
	entries, _ := os.ReadDir(b.tmpDir())
	for _, e := range entries {
		l := flock.New(filepath.Join(b.locksDir(), e.Name()+".lock"))
		if ok, err := l.TryLock(); err == nil && ok {
			os.RemoveAll(filepath.Join(b.tmpDir(), e.Name()))
			_ = l.Unlock()
		}
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// treeVersionText names a tree's version for logs.
func treeVersionText(t Tree) string {
	if t.Version.Num == 0 {
		return "unknown"
	}
	return t.Version.String()
}
