package pgsrc

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

func writeTarball(t *testing.T, files map[string]string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "postgresql-15_15.0.orig.tar.gz")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "postgresql-15.0/", Typeflag: tar.TypeDir, Mode: 0o755})
	for _, p := range []string{"configure", "src/a.c", "src/sub/b.c", "doc/README"} {
		mode := int64(0o644)
		if p == "configure" {
			mode = 0o755
		}
		tw.WriteHeader(&tar.Header{Name: "postgresql-15.0/" + p, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(files[p])), ModTime: time.Now()})
		tw.Write([]byte(files[p]))
	}
	tw.Close()
	gz.Close()
	f.Close()
	return name
}

func TestImportAndCommitAreDeterministic(t *testing.T) {
	files := map[string]string{"configure": "#!/bin/sh\n", "src/a.c": "int a;\n", "src/sub/b.c": "int b;\n", "doc/README": "hi\n"}
	ctx := context.Background()
	var bases, heads []string
	for i := 0; i < 2; i++ {
		// A fresh tarball each time: file times differ, hashes must not.
		dir := filepath.Join(t.TempDir(), "repo.git")
		base, err := Import(ctx, writeTarball(t, files), dir)
		if err != nil {
			t.Fatal(err)
		}
		when := BaseDate.Add(time.Hour)
		head, err := Commit(dir, "edit", when, map[string]func(string) (string, error){
			"src/a.c":       func(old string) (string, error) { return strings.Replace(old, "a;", "a = 1;", 1), nil },
			"src/new/c.c":   func(old string) (string, error) { return old + "int c;\n", nil },
			"src/sub/b.c":   nil,
			"doc/README":    func(string) (string, error) { return "", Delete },
			"doc/not-there": nil,
		})
		if err != nil {
			t.Fatal(err)
		}
		bases, heads = append(bases, base), append(heads, head)

		repo, err := git.PlainOpen(dir)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := repo.ResolveRevision("master")
		if c.String() != head {
			t.Errorf("master = %s, want the new commit %s", c, head)
		}
		commit, _ := repo.CommitObject(*c)
		if commit.Author.Name != Author.Name || !commit.Author.When.Equal(when) || len(commit.ParentHashes) != 1 || commit.ParentHashes[0].String() != base {
			t.Errorf("commit %+v", commit)
		}
		tree, _ := commit.Tree()
		for p, want := range map[string]string{"src/a.c": "int a = 1;\n", "src/new/c.c": "int c;\n", "configure": "#!/bin/sh\n"} {
			f, err := tree.File(p)
			if err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			if s, _ := f.Contents(); s != want {
				t.Errorf("%s = %q, want %q", p, s, want)
			}
		}
		for _, p := range []string{"src/sub/b.c", "doc/README"} {
			if _, err := tree.File(p); err == nil {
				t.Errorf("%s still exists", p)
			}
		}
		if _, err := tree.Tree("src/sub"); err == nil {
			t.Error("empty directory src/sub kept")
		}
		if e, err := tree.FindEntry("configure"); err != nil || e.Mode != filemode.Executable {
			t.Errorf("configure mode: %v, %v", e, err)
		}
	}
	if bases[0] != bases[1] || heads[0] != heads[1] {
		t.Errorf("imports differ: bases %v, heads %v", bases, heads)
	}
}

func TestCommitEditError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo.git")
	if _, err := Import(context.Background(), writeTarball(t, map[string]string{"src/a.c": "x"}), dir); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	_, err := Commit(dir, "bad", BaseDate, map[string]func(string) (string, error){"src/a.c": func(string) (string, error) { return "", boom }})
	if !errors.Is(err, boom) {
		t.Errorf("Commit error = %v, want boom", err)
	}
}

// TestTarballOf finds each major version's tarball (the newest of several)
// and names the missing one and the fix.
func TestTarballOf(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"postgresql-13_13.15.orig.tar.bz2", "postgresql-13_13.16.orig.tar.bz2",
		"postgresql-18_18.6.orig.tar.bz2", "postgresql-18_18.6-3.dsc"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PGBISECT_PGSRC_DIR", dir)
	for major, want := range map[int]string{13: "postgresql-13_13.16.orig.tar.bz2", 18: "postgresql-18_18.6.orig.tar.bz2"} {
		if got, err := TarballOf(major); err != nil || filepath.Base(got) != want {
			t.Errorf("TarballOf(%d) = %q, %v; want %s", major, got, err, want)
		}
	}
	_, err := Tarball()
	if err == nil || !strings.Contains(err.Error(), "no postgresql-15 source tarball") || !strings.Contains(err.Error(), "setup-debian.sh") {
		t.Errorf("Tarball() without a 15 tarball: %v", err)
	}
}
