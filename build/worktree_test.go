package build

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mtime(t *testing.T, p string) time.Time {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}

// TestCheckoutRewritesOnlyChangedFiles checks the property incremental
// builds rest on: moving the worktree between commits writes exactly the
// files whose contents differ, so make sees only real changes.
func TestCheckoutRewritesOnlyChangedFiles(t *testing.T) {
	h := newHistory(t)
	repo := h.open()
	wt := &worktree{dir: t.TempDir()}
	ctx := context.Background()
	if _, err := wt.checkout(ctx, repo, h.c1); err != nil {
		t.Fatal(err)
	}
	src := wt.src()
	if fi, err := os.Stat(filepath.Join(src, "configure")); err != nil || fi.Mode().Perm() != 0o644 {
		// test history stores every file as a regular file
		t.Fatalf("configure: %v %v", fi, err)
	}
	// A build product beside the sources must survive checkouts.
	if err := os.WriteFile(filepath.Join(src, "src", "a.o"), []byte("obj"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Make existing files look old, so a rewrite is visible in the mtime.
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, p := range []string{"README", "src/a.c", "src/old.c", "doc/src/sgml/ref.sgml"} {
		if err := os.Chtimes(filepath.Join(src, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	n, err := wt.checkout(ctx, repo, h.c4) // changes a.c and ref.sgml, removes old.c
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("checkout c1 -> c4 touched %d files, want 3", n)
	}
	if !mtime(t, filepath.Join(src, "README")).Equal(old) {
		t.Error("unchanged README was rewritten")
	}
	if mtime(t, filepath.Join(src, "src/a.c")).Equal(old) || readFile(t, filepath.Join(src, "src/a.c")) != "int a = 4;\n" {
		t.Error("changed a.c was not rewritten")
	}
	if _, err := os.Stat(filepath.Join(src, "src/old.c")); !os.IsNotExist(err) {
		t.Errorf("deleted old.c still there: %v", err)
	}
	if readFile(t, filepath.Join(src, "src/a.o")) != "obj" {
		t.Error("build product lost")
	}
	// Same commit again: nothing to do.
	if n, err := wt.checkout(ctx, repo, h.c4); err != nil || n != 0 {
		t.Errorf("checkout of the same commit touched %d files (%v)", n, err)
	}
	// Going back restores old.c.
	if _, err := wt.checkout(ctx, repo, h.c1); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(src, "src/old.c")) != "int old;\n" || readFile(t, filepath.Join(src, "src/a.c")) != "int a;\n" {
		t.Error("checkout back to c1 did not restore the files")
	}
}

// TestCheckoutRepairsInterruption simulates a checkout that stopped midway
// (pending list written, a file half-written): the next checkout rewrites
// that file even though the manifest says it is current.
func TestCheckoutRepairsInterruption(t *testing.T) {
	h := newHistory(t)
	repo := h.open()
	wt := &worktree{dir: t.TempDir()}
	ctx := context.Background()
	if _, err := wt.checkout(ctx, repo, h.c1); err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(wt.src(), "src/a.c")
	os.WriteFile(a, []byte("half"), 0o644)
	os.WriteFile(wt.pendingPath(), []byte("src/a.c\n"), 0o644)
	if _, err := wt.checkout(ctx, repo, h.c1); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, a); got != "int a;\n" {
		t.Errorf("a.c after repair = %q", got)
	}
	if _, err := os.Stat(wt.pendingPath()); !os.IsNotExist(err) {
		t.Error("pending list left behind")
	}
	// rewriteAll (the clean retry) rewrites every tracked file whose
	// content differs from git, and only those.
	readme := filepath.Join(wt.src(), "README")
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	os.Chtimes(readme, old, old)
	os.WriteFile(a, []byte("regenerated"), 0o644)
	if err := wt.rewriteAll(); err != nil {
		t.Fatal(err)
	}
	if n, err := wt.checkout(ctx, repo, h.c1); err != nil || n != 1 {
		t.Errorf("checkout after rewriteAll touched %d files (%v), want 1", n, err)
	}
	if readFile(t, a) != "int a;\n" || !mtime(t, readme).Equal(old) {
		t.Error("rewriteAll: a.c not restored or README rewritten")
	}
	// With nothing to rewrite, the pending list is dropped all the same.
	if err := wt.rewriteAll(); err != nil {
		t.Fatal(err)
	}
	if n, err := wt.checkout(ctx, repo, h.c1); err != nil || n != 0 {
		t.Errorf("checkout of an intact worktree after rewriteAll touched %d files (%v)", n, err)
	}
	if _, err := os.Stat(wt.pendingPath()); !os.IsNotExist(err) {
		t.Error("pending list left behind by a checkout with nothing to do")
	}
	// A corrupt manifest means unknown contents: the worktree is recreated.
	os.WriteFile(wt.manifestPath(), []byte("garbage\n"), 0o644)
	os.WriteFile(filepath.Join(wt.src(), "stale.o"), nil, 0o644)
	if _, err := wt.checkout(ctx, repo, h.c2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(wt.src(), "stale.o")); !os.IsNotExist(err) {
		t.Error("worktree with a corrupt manifest was not recreated")
	}
	if readFile(t, a) != "int a = 2;\n" {
		t.Error("recreated worktree has the wrong a.c")
	}
}

// TestKillStrays starts a process in a worktree, as a dead pgbisect's
// make would be, and checks that the next lock holder kills it.
func TestKillStrays(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "src")
	os.Mkdir(sub, 0o755)
	cmd := exec.Command("sleep", "300")
	cmd.Dir = sub
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "300") // elsewhere: must survive
	other.Dir = t.TempDir()
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	if n := killStrays(dir); n != 1 {
		t.Errorf("killStrays killed %d processes, want 1", n)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("stray process ended with %v, want killed", err)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("process outside the worktree was killed: %v", err)
	}
}

func TestFailureTailShowsFirstError(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "build.log")
	var b strings.Builder
	b.WriteString("gcc -c copyfrom.c\ncopyfrom.c:10:1: error: expected ';'\n")
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "gcc -c other%d.c\n", i)
	}
	b.WriteString("make: *** [all] Error 2\n")
	os.WriteFile(log, []byte(b.String()), 0o644)
	s := &session{logPath: log}
	tail := s.tail()
	if !strings.Contains(tail, "copyfrom.c:10:1: error: expected ';'") || !strings.HasSuffix(tail, "make: *** [all] Error 2\n") {
		t.Errorf("tail lacks the error or the last line:\n%s", tail)
	}
	if n := strings.Count(tail, "\n"); n > tailLines+maxErrorLines+2 {
		t.Errorf("tail has %d lines", n)
	}
}
