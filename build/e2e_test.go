package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// e2eFixture is a private copy of the PostgreSQL fixture repository and a
// builder on the shared test state directory, so the base build is shared
// with every other test (and every earlier run).
type e2eFixture struct {
	dir     string // the test's own repository
	base    string
	repo    *Repo
	b       *Builder
	state   string
	journal *phaseLog
}

func newE2E(t *testing.T) *e2eFixture {
	t.Helper()
	return newE2EOf(t, pgsrc.DefaultMajor, Options{})
}

// newE2EOf is newE2E for the fixture of another major version, built with
// opts.
func newE2EOf(t *testing.T, major int, opts Options) *e2eFixture {
	t.Helper()
	pgsrctest.RequireMajor(t, major)
	if err := checkTools(context.Background(), opts); err != nil {
		pgsrctest.Unavailable(t, err)
	}
	state, err := pgsrctest.StateDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pg.git")
	base, err := pgsrc.NewRepoOf(context.Background(), dir, major)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := Open(context.Background(), dir, state, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := &phaseLog{t: t}
	log := slog.New(slog.NewTextHandler(j, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b := NewBuilder(repo, state, opts, j, log)
	setBuildAs(t, b)
	return &e2eFixture{dir: dir, base: base, repo: repo, b: b, state: state, journal: j}
}

// setBuildAs makes b build as the application does: as root, as the
// servers' user (postgres), so the shared worktree's build tree always
// has the same owner.
func setBuildAs(t testing.TB, b *Builder) {
	t.Helper()
	if !proc.IsRoot() {
		return
	}
	u, err := proc.LookupUser(proc.BenchUser)
	if err != nil {
		pgsrctest.Unavailable(t, err)
	}
	b.BuildAs = u
}

// commit adds a deterministic commit to the test's repository.
func (f *e2eFixture) commit(t *testing.T, msg string, hours int, edits map[string]func(string) (string, error)) string {
	t.Helper()
	h, err := pgsrc.Commit(f.dir, msg, pgsrc.BaseDate.Add(time.Duration(hours)*time.Hour), edits)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// phaseLog passes progress to t.Log and remembers the phases it saw, so a
// test can tell whether a build did work and can wait for a phase.
type phaseLog struct {
	t      *testing.T
	mu     sync.Mutex
	lines  []string
	waitOn string
	seen   chan struct{}
}

func (p *phaseLog) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := strings.TrimRight(string(b), "\n")
	p.t.Log(s)
	p.lines = append(p.lines, s)
	if p.seen != nil && strings.Contains(s, p.waitOn) {
		close(p.seen)
		p.seen = nil
	}
	return len(b), nil
}

// reset forgets the lines seen so far.
func (p *phaseLog) reset() {
	p.mu.Lock()
	p.lines = nil
	p.mu.Unlock()
}

func (p *phaseLog) contains(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// checkoutCount returns N from the last "checkout wrote or removed N files"
// line, or -1.
func (p *phaseLog) checkoutCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := -1
	for _, l := range p.lines {
		if _, rest, ok := strings.Cut(l, "checkout wrote or removed "); ok {
			fmt.Sscanf(rest, "%d", &n)
		}
	}
	return n
}

// notify returns a channel closed when a line containing s is written.
func (p *phaseLog) notify(s string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitOn = s
	p.seen = make(chan struct{})
	return p.seen
}

func appendLine(line string) func(string) (string, error) {
	return func(old string) (string, error) { return old + line + "\n", nil }
}

// TestEndToEnd builds the real PostgreSQL 15 source: the base commit (one
// full build shared by every test through the test state directory), then
// a one-file backend change incrementally, a documentation-only commit that
// shares its parent's build, a cache hit, and a commit that does not
// compile. The built server must start and answer SELECT version().
func TestEndToEnd(t *testing.T) {
	f := newE2E(t)
	ctx := context.Background()

	baseInst, err := f.b.Build(ctx, f.base)
	if err != nil {
		t.Fatal(err)
	}
	checkServer(t, baseInst, "PostgreSQL 15.")
	// What pgbisect runs is installed, and only that (Options.All unset).
	for _, p := range []string{"bin/postgres", "bin/initdb", "bin/pg_ctl", "bin/psql", "bin/pgbench",
		"lib/libpq.so.5", "lib/postgresql/plpgsql.so", "lib/postgresql/dict_snowball.so", "share/postgresql/timezone/UTC",
		"share/postgresql/postgres.bki", "share/postgresql/postgresql.conf.sample", "share/postgresql/extension/plpgsql.control"} {
		if _, err := os.Stat(filepath.Join(baseInst.Prefix, p)); err != nil {
			t.Errorf("the install lacks %s: %v", p, err)
		}
	}
	for _, p := range []string{"bin/pg_dump", "bin/ecpg", "bin/pg_upgrade", "bin/createdb"} {
		if _, err := os.Stat(filepath.Join(baseInst.Prefix, p)); err == nil {
			t.Errorf("the install has %s, which pgbisect never runs", p)
		}
	}

	// (a) one backend .c file changes: an incremental build.
	one := f.commit(t, "copyfrom.c: add a comment", 1, map[string]func(string) (string, error){
		"src/backend/commands/copyfrom.c": appendLine("/* pgbisect e2e: one-file change */"),
	})
	f.journal.reset()
	inst, err := f.b.Build(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Commit != one || inst.Prefix == baseInst.Prefix {
		t.Errorf("build of the one-file commit: %+v", inst)
	}
	// Other tests share the worktree and may have moved it anywhere; but
	// when the checkout was small, configure must not have run again.
	if n := f.journal.checkoutCount(); n < 100 && f.journal.contains(": configure (") {
		t.Errorf("a checkout of %d files re-ran configure", n)
	} else {
		t.Logf("checkout wrote %d files", n)
	}
	checkServer(t, inst, "PostgreSQL 15.")

	// (c) a documentation-only commit shares its parent's key and build.
	doc := f.commit(t, "docs: copy.sgml", 2, map[string]func(string) (string, error){
		"doc/src/sgml/ref/copy.sgml":          appendLine("<!-- pgbisect e2e -->"),
		"src/test/regress/expected/copy2.out": appendLine("-- pgbisect e2e"),
	})
	key, err := f.b.Key(ctx, doc)
	if err != nil {
		t.Fatal(err)
	}
	if !key.SameAsParent || key.Source != one || key.ID != inst.Key {
		t.Errorf("Key(doc-only) = %+v, want the key of its parent %s", key, inst.Key)
	}
	f.journal.reset()
	docInst, err := f.b.Build(ctx, doc)
	if err != nil {
		t.Fatal(err)
	}
	if docInst.Prefix != inst.Prefix || f.journal.contains("checkout") {
		t.Errorf("doc-only commit was built: %+v", docInst)
	}

	// (d) building a built commit again does no work.
	f.journal.reset()
	again, err := f.b.Build(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	if again.Prefix != inst.Prefix || !again.BuiltAt.Equal(inst.BuiltAt) || f.journal.contains("build ") {
		t.Errorf("second build of a built commit did work: %+v", again)
	}
	if got, ok, err := f.b.Lookup(context.Background(), one); err != nil || !ok || got.Key != inst.Key {
		t.Errorf("Lookup(one) = %v, %v, %v", got, ok, err)
	}

	// (b) a commit that does not compile: typed error with the log tail,
	// after one retry from clean; asking again returns the recorded error.
	broken := f.commit(t, "copyfrom.c: break the build", 3, map[string]func(string) (string, error){
		"src/backend/commands/copyfrom.c": appendLine("this is not C;"),
	})
	f.b.Retry = true // a failure recorded by an earlier run must not hide this one
	f.journal.reset()
	_, err = f.b.Build(ctx, broken)
	var be *Error
	if !errors.Is(err, ErrBuildFailed) || !errors.As(err, &be) {
		t.Fatalf("Build(broken) = %v, want a *build.Error", err)
	}
	if be.Phase != "make" || be.Commit != broken || !strings.Contains(be.Tail, "copyfrom.c") || !strings.Contains(be.Tail, "error") {
		t.Errorf("build error: phase %q commit %s tail:\n%s", be.Phase, Short(be.Commit), be.Tail)
	}
	if n := strings.Count(be.Tail, "\n"); n > tailLines+maxErrorLines+2 {
		t.Errorf("tail has %d lines", n)
	}
	if log, err := os.ReadFile(be.LogPath); err != nil || !strings.Contains(string(log), "this is not C") {
		t.Errorf("full log %s: %v", be.LogPath, err)
	}
	if !f.journal.contains("retrying from a clean worktree") {
		t.Error("the failed incremental build was not retried from clean")
	}
	f.b.Retry = false
	_, err2 := f.b.Build(ctx, broken)
	var be2 *Error
	if !errors.As(err2, &be2) || be2.LogPath != be.LogPath || be2.Tail != be.Tail {
		t.Errorf("second Build(broken) = %v, want the recorded failure", err2)
	}
	if _, ok, _ := f.b.Lookup(context.Background(), broken); ok {
		t.Error("a failed build is in the cache")
	}
}

// TestInterruptedBuild cancels a build during make and checks that the
// cache gained no entry, no temporary install is left and no compiler or
// make is still running.
func TestInterruptedBuild(t *testing.T) {
	f := newE2E(t)
	if _, err := f.b.Build(context.Background(), f.base); err != nil {
		t.Fatal(err)
	}
	c := f.commit(t, "execMain.c: interrupted", 4, map[string]func(string) (string, error){
		"src/backend/executor/execMain.c": appendLine("/* pgbisect e2e: interrupted build */"),
	})
	key, err := f.b.Key(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := readTree(f.repo, c)
	if err != nil {
		t.Fatal(err)
	}
	wt := f.b.worktreeFor(f.b.opts.ForTree(tree), tree)
	os.RemoveAll(filepath.Join(f.state, "builds", key.ID)) // from an earlier run, if any
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inMake := f.journal.notify(": make (")
	done := make(chan error, 1)
	go func() {
		_, err := f.b.Build(ctx, c)
		done <- err
	}()
	select {
	case <-inMake:
		cancel()
	case err := <-done:
		t.Fatalf("build ended before make started: %v", err)
	}
	err = <-done
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrBuildFailed) {
		t.Fatalf("interrupted Build = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(f.state, "builds", key.ID)); !os.IsNotExist(err) {
		t.Errorf("interrupted build left a cache entry: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.state, "builds", ".tmp", key.ID)); !os.IsNotExist(err) {
		t.Errorf("interrupted build left its temporary install: %v", err)
	}
	if _, ok := f.b.readFailure(key.ID); ok {
		t.Error("an interrupted build was recorded as a failure")
	}
	// Killed processes may take a moment to be reaped; proc gives them
	// WaitDelay before SIGKILL.
	deadline := time.Now().Add(2 * proc.WaitDelay)
	for {
		procs := processesUnder(wt.dir)
		if len(procs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("processes still running in the worktree: %v", procs)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesUnder lists processes whose working directory is under dir.
func processesUnder(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err == nil && strings.HasPrefix(cwd, dir) {
			cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			out = append(out, fmt.Sprintf("%s: %s", e.Name(), strings.ReplaceAll(string(cmd), "\x00", " ")))
		}
	}
	return out
}

// checkServer starts the install's server as the unprivileged user on a
// private socket, asks SELECT version(), and stops it.
func checkServer(t *testing.T, inst *Install, want string) {
	t.Helper()
	user, err := proc.LookupUser(proc.BenchUser)
	if err != nil {
		pgsrctest.Unavailable(t, err)
	}
	// psql must load the install's own libpq, found through the rpath.
	if out, err := exec.Command("ldd", filepath.Join(inst.BinDir(), "psql")).Output(); err == nil {
		if !strings.Contains(string(out), inst.Prefix+"/bin/../lib/libpq.so") {
			t.Errorf("psql does not use the install's libpq:\n%s", out)
		}
	}
	// Not t.TempDir(): its parent is 0700, closed to the server's user.
	dir, err := os.MkdirTemp("", "pgbisect-build-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := proc.Chown(d, user); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := proc.Command(ctx, user, filepath.Join(inst.BinDir(), name), args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	run("pg_ctl", "-D", data, "-w", "-l", filepath.Join(sock, "log"), "-o", fmt.Sprintf("-k %s -c listen_addresses='' -p 5999", sock), "start")
	defer func() {
		cmd := proc.Command(context.Background(), user, filepath.Join(inst.BinDir(), "pg_ctl"), "-D", data, "-w", "-m", "fast", "stop")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("pg_ctl stop: %v\n%s", err, out)
		}
	}()
	out := run("psql", "-h", sock, "-p", "5999", "-U", "postgres", "-d", "postgres", "-XAtc", "SELECT version()")
	if !strings.Contains(out, want) {
		t.Errorf("SELECT version() = %q, want %q", out, want)
	}
	_ = io.Discard
}

// TestBuildRunsAsBuildUser builds a commit whose Makefile records, while
// make runs, the uid it runs as and tries to write into the source tree.
// As root, make must run as BuildAs (postgres), the source must stay
// unwritten, the objects must be the build user's, and the cached install
// root's, writable by nobody else. The commit's cache entry is removed
// first, so every run builds (incrementally, in the shared worktree).
func TestBuildRunsAsBuildUser(t *testing.T) {
	f := newE2E(t)
	ctx := context.Background()
	mk := "src/backend/commands/Makefile"
	c := f.commit(t, "commands/Makefile: record who runs make", 5, map[string]func(string) (string, error){
		mk: appendLine("$(shell id -u > $(abs_top_builddir)/pgbisect-make-uid)\n" +
			"$(shell touch $(abs_top_srcdir)/pgbisect-srcdir-write 2>/dev/null)"),
		"src/backend/commands/copyfrom.c": appendLine("/* pgbisect e2e: built as the build user */"),
	})
	key, err := f.b.Key(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(f.state, "builds", key.ID)) // from an earlier run
	tree, err := readTree(f.repo, c)
	if err != nil {
		t.Fatal(err)
	}
	wt := f.b.worktreeFor(f.b.opts.ForTree(tree), tree)
	os.Remove(filepath.Join(wt.build(), "pgbisect-make-uid"))
	f.b.Retry = true // a failure recorded by an earlier run must not hide this build
	inst, err := f.b.Build(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	want := os.Geteuid()
	if proc.IsRoot() {
		want = int(f.b.BuildAs.UID)
	}
	data, err := os.ReadFile(filepath.Join(wt.build(), "pgbisect-make-uid"))
	if err != nil {
		t.Fatalf("the Makefile's record of make's uid: %v", err)
	}
	if got := strings.TrimSpace(string(data)); got != fmt.Sprint(want) {
		t.Errorf("make ran as uid %s, want %d", got, want)
	}
	if uid, err := ownerOf(filepath.Join(wt.build(), "src/backend/commands/copyfrom.o")); err != nil || uid != want {
		t.Errorf("copyfrom.o is owned by uid %d (%v), want %d", uid, err, want)
	}
	if exists(filepath.Join(wt.src(), "src/backend/commands/copyfrom.o")) {
		t.Error("an object file was written into the source tree: not a VPATH build")
	}
	if proc.IsRoot() {
		if exists(filepath.Join(wt.src(), "pgbisect-srcdir-write")) {
			t.Error("make, as the build user, could write into the source tree")
		}
		for _, p := range []string{"bin/postgres", "bin", "lib", "share/postgresql/postgresql.conf.sample"} {
			full := filepath.Join(inst.Prefix, p)
			fi, err := os.Lstat(full)
			if err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			if uid, _ := ownerOf(full); uid != 0 || fi.Mode().Perm()&0o022 != 0 {
				t.Errorf("cached %s: uid %d, mode %v; want root's, writable by root only", p, uid, fi.Mode())
			}
		}
	}
	checkServer(t, inst, "PostgreSQL 15.")
}
