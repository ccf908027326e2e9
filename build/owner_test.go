package build

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// buildUser returns the unprivileged user builds drop to in these tests,
// skipping when the test does not run as root or has no such user.
func buildUser(t *testing.T) *proc.User {
	t.Helper()
	citest.Root(t, "builds drop privileges to another user only when pgbisect is root")
	u, err := proc.LookupUser(proc.BenchUser)
	if err != nil {
		citest.Unavailable(t, "no user to build as: %v (scripts/setup-debian.sh installs postgresql, which creates it)", err)
	}
	return u
}

// stateDir returns a state directory the build user can reach (not
// t.TempDir(), whose parent is 0700).
func reachableDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "pgbisect-build-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestBuildCommands(t *testing.T) {
	wt := &worktree{dir: "/s/worktrees/abc"}
	o := Options{Configure: []string{"--with-openssl"}, CFLAGS: "-O1", Jobs: 3}
	got := configureCommand(wt, o, "ccache")
	want := command{dir: "/s/worktrees/abc/build", name: "/s/worktrees/abc/src/configure",
		args: []string{"--prefix=/pgbisect", "--enable-depend", "--with-openssl", "CFLAGS=-O1", "CC=ccache gcc"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("configure:\n got %v\nwant %v", got, want)
	}
	if got := configureCommand(wt, Options{}, ""); fmt.Sprint(got.args) != "[--prefix=/pgbisect --enable-depend]" {
		t.Errorf("configure without ccache or flags: %v", got.args)
	}
	if got := makeCommand(wt, o); fmt.Sprint(got) != fmt.Sprint(command{dir: "/s/worktrees/abc/build", name: "make", args: []string{"-j", "3", rpathdir}}) {
		t.Errorf("make: %v", got)
	}
	if got := installCommand(wt, o, "/s/builds/.tmp/k/stage"); fmt.Sprint(got) != fmt.Sprint(command{dir: "/s/worktrees/abc/build", name: "make",
		args: []string{"-j", "3", "install", "DESTDIR=/s/builds/.tmp/k/stage", rpathdir}}) {
		t.Errorf("install: %v", got)
	}
	if got := installCommand(wt, Options{Meson: true}, "/d"); got.dir != "/s/worktrees/abc/meson-build" || got.name != "meson" {
		t.Errorf("meson install: %v", got)
	}

	b := NewBuilder(nil, "/s", Options{}, nil, nil)
	env := strings.Join(b.env(), " ")
	if env != "CCACHE_DIR=/s/ccache CCACHE_BASEDIR=/s/worktrees LC_ALL=C" {
		t.Errorf("env without a build user: %s", env)
	}
	b.BuildAs = &proc.User{Name: "bob", UID: 4242, GID: 4242, Home: "/home/bob"}
	env = strings.Join(b.env(), " ")
	if proc.IsRoot() && !strings.HasSuffix(env, " HOME=/home/bob USER=bob LOGNAME=bob") {
		t.Errorf("env of a build run as bob: %s", env)
	}
	if !proc.IsRoot() && strings.Contains(env, "bob") {
		t.Errorf("not root, yet the env names the build user: %s", env)
	}
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMigrateInTreeWorktree: a worktree an earlier pgbisect configured and
// built in src loses its source (rewritten by the next checkout) and is
// marked out of tree; a VPATH worktree is left alone, unless something
// configured its source in place since.
func TestMigrateInTreeWorktree(t *testing.T) {
	wt := &worktree{dir: t.TempDir()}
	if changed, err := wt.migrate(); err != nil || changed {
		t.Fatalf("migrate of an empty worktree = %v, %v", changed, err)
	}
	writeFiles(t, wt.dir, map[string]string{
		"src/configure": "", "src/config.status": "", "src/GNUmakefile": "",
		"src/src/backend/main.o": "", "manifest": "", "meson-build/build.ninja": "",
		"state.json": `{"Commit": "a8ff8a3d5b2a7eeb776bf93dfc99debe8e933cf6", "Configured": "08d277cc6ad8be20", "Built": "a8ff8a3d5b2a7eeb776bf93dfc99debe8e933cf6"}`,
	})
	changed, err := wt.migrate()
	if err != nil || !changed {
		t.Fatalf("migrate of an in-tree worktree = %v, %v", changed, err)
	}
	for _, p := range []string{wt.src(), wt.manifestPath(), wt.mesonBuild()} {
		if exists(p) {
			t.Errorf("%s survived the migration", p)
		}
	}
	if st := wt.state(); st != (worktreeState{Layout: layoutVPATH}) {
		t.Errorf("state after migration: %+v", st)
	}
	if changed, err := wt.migrate(); err != nil || changed {
		t.Errorf("second migrate = %v, %v", changed, err)
	}

	// A VPATH worktree with a build tree: nothing to do.
	writeFiles(t, wt.dir, map[string]string{"src/configure": "", "manifest": "", "build/config.status": "", "build/src/backend/main.o": ""})
	if err := wt.saveState(worktreeState{Commit: "c", Configured: "h", Layout: layoutVPATH}); err != nil {
		t.Fatal(err)
	}
	if changed, err := wt.migrate(); err != nil || changed || !exists(wt.manifestPath()) {
		t.Errorf("migrate of a VPATH worktree = %v, %v", changed, err)
	}
	// Something (an older pgbisect sharing the state directory) configured
	// the source in place since: the source goes, the build tree stays.
	writeFiles(t, wt.dir, map[string]string{"src/config.status": ""})
	if changed, err := wt.migrate(); err != nil || !changed {
		t.Errorf("migrate of a VPATH worktree configured in place = %v, %v", changed, err)
	}
	if exists(wt.src()) || !exists(filepath.Join(wt.build(), "src/backend/main.o")) {
		t.Error("the source should be gone and the build tree kept")
	}
}

func owner(t *testing.T, p string) int {
	t.Helper()
	uid, err := ownerOf(p)
	if err != nil {
		t.Fatal(err)
	}
	return uid
}

// TestOwnedDirAndChownTree: a build directory of another user is replaced
// by the build user's; a tree given to the build user (the ccache) is
// changed without following a link out of it.
func TestOwnedDirAndChownTree(t *testing.T) {
	u := buildUser(t)
	d := reachableDir(t)
	dir := filepath.Join(d, "build")
	writeFiles(t, dir, map[string]string{"src/backend/main.o": "root's"})
	removed, err := ownedDir(dir, u)
	if err != nil || !removed {
		t.Fatalf("ownedDir of root's build tree = %v, %v", removed, err)
	}
	if owner(t, dir) != int(u.UID) || exists(filepath.Join(dir, "src")) {
		t.Errorf("build tree after ownedDir: owner %d", owner(t, dir))
	}
	if removed, err := ownedDir(dir, u); err != nil || removed {
		t.Errorf("second ownedDir = %v, %v", removed, err)
	}

	ccache := filepath.Join(d, "ccache")
	outside := filepath.Join(d, "outside")
	writeFiles(t, ccache, map[string]string{"a/b/obj": "x", "ccache.conf": ""})
	writeFiles(t, d, map[string]string{"outside": "root's"})
	if err := os.Symlink(outside, filepath.Join(ccache, "a", "link")); err != nil {
		t.Fatal(err)
	}
	if err := chownTree(ccache, u); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"", "a", "a/b", "a/b/obj", "ccache.conf", "a/link"} {
		if got := owner(t, filepath.Join(ccache, p)); got != int(u.UID) {
			t.Errorf("%s: owner %d, want %d", p, got, u.UID)
		}
	}
	if got := owner(t, outside); got != 0 {
		t.Errorf("chownTree followed a link out of the tree: %s is owned by %d", outside, got)
	}
	// A hard link to root's file is not given away.
	if err := os.Link(outside, filepath.Join(ccache, "a", "hard")); err != nil {
		t.Fatal(err)
	}
	if err := chownTree(ccache, u); err != nil {
		t.Fatal(err)
	}
	if got := owner(t, outside); got != 0 {
		t.Errorf("chownTree gave away a hard-linked file: %s is owned by %d", outside, got)
	}
}

// TestCopyInstall: the staged install becomes root's, without setuid bits,
// with links kept as links, and anything else refused.
func TestCopyInstall(t *testing.T) {
	u := buildUser(t)
	d := reachableDir(t)
	stage := filepath.Join(d, "stage")
	writeFiles(t, stage, map[string]string{"bin/postgres": "ELF", "lib/libpq.so.5.15": "lib", "share/x.sample": "s"})
	if err := os.Chmod(filepath.Join(stage, "share/x.sample"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("libpq.so.5.15", filepath.Join(stage, "lib/libpq.so")); err != nil {
		t.Fatal(err)
	}
	if err := chownTree(stage, u); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(stage, "bin/postgres"), 0o4775); err != nil { // after the chown, which clears it
		t.Fatal(err)
	}
	dst := filepath.Join(d, "install")
	size, err := copyInstall(stage, dst, int(u.UID), "")
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len("ELF")+len("lib")+len("s")) {
		t.Errorf("size %d", size)
	}
	for p, want := range map[string]os.FileMode{"bin": os.ModeDir | 0o755, "bin/postgres": 0o755, "share/x.sample": 0o644, "lib/libpq.so.5.15": 0o644} {
		fi, err := os.Lstat(filepath.Join(dst, p))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != want || st.Uid != 0 {
			t.Errorf("%s: mode %v uid %d, want %v and root's", p, fi.Mode(), st.Uid, want)
		}
	}
	if got, err := os.Readlink(filepath.Join(dst, "lib/libpq.so")); err != nil || got != "libpq.so.5.15" {
		t.Errorf("lib/libpq.so -> %q (%v), want a link to libpq.so.5.15", got, err)
	}

	// A link out of the install (to a file the build user could change
	// later) is refused, absolute or relative.
	for i, l := range []struct{ name, target string }{{"etc", "/etc"}, {"lib/up", "../../secret"}, {"bin/pgbench", "../../../home/x/pgbench"}} {
		if err := os.Symlink(l.target, filepath.Join(stage, l.name)); err != nil {
			t.Fatal(err)
		}
		if _, err := copyInstall(stage, filepath.Join(d, fmt.Sprintf("install-link-%d", i)), int(u.UID), ""); err == nil || !strings.Contains(err.Error(), l.name) {
			t.Errorf("copy of an install with %s -> %s: %v", l.name, l.target, err)
		}
		os.Remove(filepath.Join(stage, l.name))
	}

	// A hard link to a file that is not the build user's (what
	// fs.protected_hardlinks=0 would allow) is not copied.
	secret := filepath.Join(d, "secret")
	writeFiles(t, d, map[string]string{"secret": "root only"})
	if err := os.Link(secret, filepath.Join(stage, "share/secret")); err != nil {
		t.Fatal(err)
	}
	if _, err := copyInstall(stage, filepath.Join(d, "install2"), int(u.UID), ""); err == nil || !strings.Contains(err.Error(), "share/secret") {
		t.Errorf("copy of an install holding root's file: %v", err)
	}
	os.Remove(filepath.Join(stage, "share/secret"))

	if err := syscall.Mkfifo(filepath.Join(stage, "bin/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := copyInstall(stage, filepath.Join(d, "install3"), int(u.UID), ""); err == nil || !strings.Contains(err.Error(), "bin/fifo") {
		t.Errorf("copy of an install with a fifo: %v", err)
	}
}

func isLink(t *testing.T, p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}

// TestBuildAsUser runs a whole Build of a small tree whose configure and
// Makefile record who runs them and try to write into the source: as
// root with BuildAs set, configure runs from the build directory as the
// build user, cannot write the source, make runs as the build user, and
// the cached install is root's. A second commit reuses the configured
// build tree.
func TestBuildAsUser(t *testing.T) {
	u := buildUser(t)
	if err := checkTools(context.Background(), Options{}); err != nil {
		citest.Unavailable(t, "build tools missing: %v", err)
	}
	t.Setenv("CCACHE_DISABLE", "1")
	configure := `#!/bin/sh
srcdir=$(dirname "$0")
echo "$(id -u) $PWD $0" >> configure-runs
touch "$srcdir/written-by-configure" 2>/dev/null
echo configured > config.status
mkdir -p src && : > src/Makefile.global
sed "s#@srcdir@#$srcdir#" "$srcdir/Makefile.in" > Makefile
`
	makefile := `SRCDIR = @srcdir@
all:
	id -u > made-by
	touch $(SRCDIR)/written-by-make 2>/dev/null || true
install:
	mkdir -p $(DESTDIR)/pgbisect/bin $(DESTDIR)/pgbisect/lib
	cp made-by $(DESTDIR)/pgbisect/bin/postgres
	chmod 4755 $(DESTDIR)/pgbisect/bin/postgres
	ln -s postgres $(DESTDIR)/pgbisect/bin/postmaster
`
	r := newTestRepo(t)
	r.exec = map[string]bool{"configure": true}
	files := map[string]string{"configure": configure, "Makefile.in": makefile, "configure.ac": configureAC15, "src/backend/main.c": "1\n"}
	c1 := r.commit("one", nil, files)
	files["src/backend/main.c"] = "2\n"
	c2 := r.commit("two", []string{c1}, files)

	state := reachableDir(t)
	// A ccache directory left by an earlier pgbisect that built as root.
	writeFiles(t, filepath.Join(state, "ccache"), map[string]string{"0/1/objR": "x"})
	b := NewBuilder(r.open(), state, Options{}, nil, nil)
	b.BuildAs = u
	inst, err := b.Build(context.Background(), c1)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := readTree(b.repo, c1)
	if err != nil {
		t.Fatal(err)
	}
	wt := b.worktreeFor(b.opts, tree)
	runs, _ := os.ReadFile(filepath.Join(wt.build(), "configure-runs"))
	want := fmt.Sprintf("%d %s %s\n", u.UID, wt.build(), filepath.Join(wt.src(), "configure"))
	if string(runs) != want {
		t.Errorf("configure runs:\n%s\nwant:\n%s", runs, want)
	}
	if made, _ := os.ReadFile(filepath.Join(wt.build(), "made-by")); strings.TrimSpace(string(made)) != fmt.Sprint(u.UID) {
		t.Errorf("make ran as %q, want uid %d", made, u.UID)
	}
	for _, p := range []string{"written-by-configure", "written-by-make"} {
		if exists(filepath.Join(wt.src(), p)) {
			t.Errorf("the build user wrote %s into the source", p)
		}
	}
	if owner(t, wt.src()) != 0 || owner(t, wt.build()) != int(u.UID) {
		t.Errorf("owners: src %d, build %d", owner(t, wt.src()), owner(t, wt.build()))
	}
	if got := owner(t, filepath.Join(state, "ccache", "0", "1", "objR")); got != int(u.UID) {
		t.Errorf("the old ccache was not given to the build user: owner %d", got)
	}
	fi, err := os.Stat(filepath.Join(inst.BinDir(), "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o755 || fi.Sys().(*syscall.Stat_t).Uid != 0 || owner(t, inst.Prefix) != 0 {
		t.Errorf("cached postgres: %v uid %d; prefix uid %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid, owner(t, inst.Prefix))
	}
	if !isLink(t, filepath.Join(inst.Prefix, "bin", "postmaster")) {
		t.Error("a link in the install was not kept as a link") // links out of it are refused: TestCopyInstall
	}
	if exists(filepath.Join(b.tmpDir(), inst.Key)) {
		t.Error("the staging directory was left behind")
	}

	if _, err := b.Build(context.Background(), c2); err != nil {
		t.Fatal(err)
	}
	if runs, _ := os.ReadFile(filepath.Join(wt.build(), "configure-runs")); strings.Count(string(runs), "\n") != 1 {
		t.Errorf("configure ran again for a commit that does not change its inputs:\n%s", runs)
	}

	// The build user changes (run_as edited): the build tree is replaced.
	if err := os.Chown(wt.build(), 0, 0); err != nil {
		t.Fatal(err)
	}
	files["src/backend/main.c"] = "3\n"
	c3 := r.commit("three", []string{c2}, files)
	if _, err := b.Build(context.Background(), c3); err != nil {
		t.Fatal(err)
	}
	if runs, _ := os.ReadFile(filepath.Join(wt.build(), "configure-runs")); strings.Count(string(runs), "\n") != 1 || owner(t, wt.build()) != int(u.UID) {
		t.Errorf("after the build tree changed owner: configure runs %q, owner %d", runs, owner(t, wt.build()))
	}
}

// TestCheckoutOneMTime: the files one checkout writes share one
// modification time, so a tracked generated file never looks older than
// its input; a later checkout's files are newer.
func TestCheckoutOneMTime(t *testing.T) {
	r := newTestRepo(t)
	files := map[string]string{"a/gram.c": "c", "a/gram.y": "y", "b/x.c": "x", "doc/ref.sgml": "s", "z.h": "h"}
	c1 := r.commit("one", nil, files)
	files["a/gram.y"] = "y2"
	c2 := r.commit("two", []string{c1}, files)
	repo := r.open()
	wt := &worktree{dir: t.TempDir()}
	mtimes := func() map[string]int64 {
		m := map[string]int64{}
		for p := range files {
			fi, err := os.Stat(filepath.Join(wt.src(), p))
			if err != nil {
				t.Fatal(err)
			}
			m[p] = fi.ModTime().UnixNano()
		}
		return m
	}
	if _, err := wt.checkout(context.Background(), repo, c1); err != nil {
		t.Fatal(err)
	}
	first := mtimes()
	for p, m := range first {
		if m != first["a/gram.c"] {
			t.Errorf("%s: mtime %d, gram.c %d", p, m, first["a/gram.c"])
		}
	}
	if _, err := wt.checkout(context.Background(), repo, c2); err != nil {
		t.Fatal(err)
	}
	second := mtimes()
	if second["a/gram.y"] <= first["a/gram.y"] || second["a/gram.c"] != first["a/gram.c"] {
		t.Errorf("after the second checkout: gram.y %d (was %d), gram.c %d (was %d)", second["a/gram.y"], first["a/gram.y"], second["a/gram.c"], first["a/gram.c"])
	}
}
