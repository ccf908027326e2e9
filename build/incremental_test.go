package build

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFullInstallBecause(t *testing.T) {
	for _, tc := range []struct {
		paths []string
		full  bool
	}{
		{[]string{"src/backend/commands/copyfrom.c"}, false},
		{[]string{"src/backend/parser/gram.y", "src/backend/parser/scan.l"}, false},
		{[]string{"src/backend/commands/copyfrom.c", "src/test/regress/expected/copy2.out", "doc/src/sgml/ref/copy.sgml"}, false},
		{[]string{"src/backend/commands/Makefile"}, true},
		{[]string{"src/Makefile.global.in"}, true},
		{[]string{"src/Makefile.shlib"}, true},
		{[]string{"contrib/contrib-global.mk"}, true},
		{[]string{"src/include/access/heapam.h"}, true},
		{[]string{"src/interfaces/libpq/libpq-fe.h"}, true},
		{[]string{"src/backend/catalog/system_views.sql"}, true},
		{[]string{"src/backend/utils/misc/postgresql.conf.sample"}, true},
		{[]string{"src/timezone/data/tzdata.zi"}, true},
		{[]string{"src/include/catalog/pg_proc.dat"}, true},
		{[]string{"configure"}, true},
		{[]string{"src/template/linux"}, true},
		{[]string{"config/install-sh"}, true},
		{[]string{"src/backend/meson.build", "meson_options.txt"}, false},
		{[]string{"src/backend/meson.build", "src/backend/Makefile"}, true},
	} {
		why := fullInstallBecause(tc.paths, DefaultNoCompile, Options{})
		if (why != "") != tc.full {
			t.Errorf("fullInstallBecause(%q) = %q, want full %v", tc.paths, why, tc.full)
		}
	}
}

func TestProductDirs(t *testing.T) {
	write := func(root, p string, when time.Time) {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(full, when, when)
	}
	old, since, now := time.Now().Add(-time.Hour), time.Now().Add(-time.Minute), time.Now()
	root := t.TempDir()
	for _, p := range []string{"src/backend/postgres", "src/bin/psql/psql", "src/port/libpgport.a", "config.status"} {
		write(root, p, old)
	}
	for _, p := range []string{"src/backend/commands/copyfrom.o", "src/backend/commands/.deps/copyfrom.Po",
		"src/backend/commands/objfiles.txt", "src/backend/postgres", "src/backend/catalog/postgres.bki"} {
		write(root, p, now)
	}
	dirs, why, err := productDirs(root, since)
	want := map[string][]string{"src/backend": {"postgres"}, "src/backend/catalog": {"postgres.bki"}}
	if err != nil || why != "" || !reflect.DeepEqual(dirs, want) {
		t.Errorf("productDirs = %q, %q, %v; want %q", dirs, why, err, want)
	}
	c := partialInstallCommand(&worktree{dir: "/w"}, Options{Jobs: 2}, "/stage", "src/backend", dirs["src/backend"])
	if got := c.dir + " " + c.name + " " + strings.Join(c.args, " "); got != "/w/build/src/backend make -j 2 -o all -o postgres install DESTDIR=/stage "+rpathdir {
		t.Errorf("partial install command: %s", got)
	}

	for p, want := range map[string]string{
		"src/backend/utils/fmgroids.h":   "generated header",
		"src/include/utils/errcodes.h":   "generated header",
		"src/include/pg_config_os.thing": "src/include",
		"pgbisect-stamp":                 "pgbisect-stamp",
	} {
		root := t.TempDir()
		write(root, "src/backend/postgres", now)
		write(root, p, now)
		if dirs, why, err := productDirs(root, since); err != nil || !strings.Contains(why, want) || dirs != nil {
			t.Errorf("with %s: productDirs = %q, %q, %v; want a full install because of %q", p, dirs, why, err, want)
		}
	}

	root = t.TempDir()
	for i := range maxPartialDirs + 1 {
		write(root, filepath.Join("src/bin", string(rune('a'+i)), "prog"), now)
	}
	if _, why, _ := productDirs(root, since); !strings.Contains(why, "directories") {
		t.Errorf("products in %d directories: %q, want a full install", maxPartialDirs+1, why)
	}
}

// fileFacts is what must not change in a cached file.
type fileFacts struct {
	ino, nlink uint64
	mode       fs.FileMode
	mtime      time.Time
	sum        [32]byte
}

// snapshot records every regular file of an install.
func snapshot(t *testing.T, prefix string) map[string]fileFacts {
	t.Helper()
	out := map[string]fileFacts{}
	err := filepath.WalkDir(prefix, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		var facts fileFacts
		facts.ino, facts.nlink, facts.mode, facts.mtime = st.Ino, uint64(st.Nlink), fi.Mode(), fi.ModTime()
		copy(facts.sum[:], h.Sum(nil))
		rel, _ := filepath.Rel(prefix, p)
		out[rel] = facts
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestIncrementalInstall builds, in the shared worktree, a one-file backend
// change and then a child of it that changes the server's code: the child
// must install only what changed (make install in src/backend alone) over
// links to its parent's install, and leave every file of the parent's
// cached install as it was (same inode, content, mode and mtime; the link
// count up by one exactly where the child shares the file). The child's
// server must start.
func TestIncrementalInstall(t *testing.T) {
	f := newE2E(t)
	ctx := context.Background()
	if _, err := f.b.Build(ctx, f.base); err != nil {
		t.Fatal(err)
	}
	// Other test packages share the worktree: if one builds between the
	// parent and the child, the child's parent is not ours and it installs
	// everything. A few tries.
	for try := 1; ; try++ {
		parentCommit := f.commit(t, "copyfrom.c: a comment", 20+2*try, map[string]func(string) (string, error){
			"src/backend/commands/copyfrom.c": appendLine(fmt.Sprintf("/* pgbisect incremental install: parent %d */", try)),
		})
		f.uncache(t, parentCommit)
		parent, err := f.b.Build(ctx, parentCommit)
		if err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, parent.Prefix)
		child := f.commit(t, "copyfrom.c: a function", 21+2*try, map[string]func(string) (string, error){
			"src/backend/commands/copyfrom.c": appendLine("int pgbisect_incremental_marker(void);\nint pgbisect_incremental_marker(void) { return 42; }"),
		})
		f.uncache(t, child)
		f.journal.reset()
		inst, err := f.b.Build(ctx, child)
		if err != nil {
			t.Fatal(err)
		}
		after := snapshot(t, parent.Prefix)
		childFiles := snapshot(t, inst.Prefix)
		if len(after) != len(before) {
			t.Errorf("the parent's install had %d files, has %d", len(before), len(after))
		}
		for p, b := range before {
			a := after[p]
			shared := childFiles[p].ino == b.ino
			wantLinks := b.nlink
			if shared {
				wantLinks++
			}
			if a.ino != b.ino || a.sum != b.sum || a.mode != b.mode || !a.mtime.Equal(b.mtime) || a.nlink != wantLinks {
				t.Errorf("the parent's cached %s changed: %+v, was %+v (shared with the child: %v)", p, a, b, shared)
			}
		}
		if !f.journal.contains("installing only what changed since " + Short(parentCommit)) {
			if try < 3 && f.journal.contains("installing everything") {
				t.Logf("try %d: another build came between the parent and the child; again", try)
				continue
			}
			t.Fatal("the child did not install only what changed")
		}
		if !f.journal.contains("since "+Short(parentCommit)+": make install in src/backend") || f.journal.contains("make install in src/backend,") {
			t.Error("the child's partial install ran elsewhere than in src/backend alone")
		}
		var linked, copied []string
		for p, c := range childFiles {
			if p == installFile {
				continue
			}
			if b, ok := before[p]; ok && b.ino == c.ino {
				linked = append(linked, p)
			} else {
				copied = append(copied, p)
			}
		}
		if len(childFiles) != len(before) {
			t.Errorf("the child's install has %d files, its parent's %d", len(childFiles), len(before))
		}
		slices.Sort(copied)
		t.Logf("child install: %d files linked to the parent's, %d new: %s", len(linked), len(copied), strings.Join(copied, " "))
		if !slices.Contains(copied, "bin/postgres") || !slices.Contains(linked, "bin/psql") {
			t.Errorf("new files %q: want bin/postgres new and bin/psql linked", copied)
		}
		if childFiles["bin/postgres"].sum == before["bin/postgres"].sum {
			t.Error("the child's postgres is its parent's")
		}
		if c := childFiles["bin/postgres"]; c.nlink != 1 {
			t.Errorf("the child's postgres: %+v", c)
		}
		checkServer(t, inst, "PostgreSQL 15.")
		return
	}
}

// uncache removes a commit's cache entry left by an earlier run, so that
// it is built again.
func (f *e2eFixture) uncache(t *testing.T, commit string) {
	t.Helper()
	key, err := f.b.Key(context.Background(), commit)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(f.b.prefix(key.ID)); err != nil {
		t.Fatal(err)
	}
}
