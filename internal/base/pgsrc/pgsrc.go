// Package pgsrc turns Debian's PostgreSQL source tarballs (15 by default;
// 13 and 18 too, see TarballOf) into git repositories, the fixtures of
// pgbisect's end-to-end tests and demo.
//
// Every commit it makes is deterministic (fixed author, given dates, trees
// written straight into the object store), so the same tarball gives the
// same commit hashes on every machine and in every test process. Because
// build keys are commit hashes, that is what lets every test share one full
// PostgreSQL build.
package pgsrc

import (
	"archive/tar"
	"bufio"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Author is the author and committer of every fixture commit.
var Author = object.Signature{Name: "pgbisect fixture", Email: "fixture@pgbisect.invalid"}

// BaseDate is the date of the imported commit.
var BaseDate = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Branch is the branch Import creates and Commit advances.
const Branch = "master"

// DefaultDir is where scripts/setup-debian.sh puts the source tarball.
const DefaultDir = "/var/cache/pgbisect/pgsrc"

// DefaultMajor is the major version of the fixture most tests and the demo
// use: Debian bookworm's PostgreSQL 15.
const DefaultMajor = 15

// Tarball returns the path of the postgresql-15 orig tarball (TarballOf
// DefaultMajor).
func Tarball() (string, error) { return TarballOf(DefaultMajor) }

// TarballOf returns the path of the postgresql-<major> orig tarball in
// $PGBISECT_PGSRC_DIR or DefaultDir (the newest, if several).
// scripts/setup-debian.sh downloads those of 13, 15 and 18.
func TarballOf(major int) (string, error) {
	dir := os.Getenv("PGBISECT_PGSRC_DIR")
	if dir == "" {
		dir = DefaultDir
	}
	pattern := fmt.Sprintf("postgresql-%d_*.orig.tar.*", major)
	matches, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(matches) == 0 {
		return "", fmt.Errorf("no postgresql-%d source tarball (%s) in %s: run scripts/setup-debian.sh as root to download it (or set PGBISECT_PGSRC_DIR)", major, pattern, dir)
	}
	sort.Strings(matches)
	return matches[len(matches)-1], nil
}

// Import extracts tarball (.tar.bz2, .tar.gz or .tar) into a new bare
// repository at dir as one commit on Branch, authored by Author at
// BaseDate, and returns its hash. The top-level directory of the tarball
// (postgresql-15.x/) is stripped. dir must not hold a repository yet.
func Import(ctx context.Context, tarball, dir string) (string, error) {
	f, err := os.Open(tarball)
	if err != nil {
		return "", fmt.Errorf("importing PostgreSQL source: %w", err)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(f, 1<<20)
	switch {
	case strings.HasSuffix(tarball, ".bz2"):
		r = bzip2.NewReader(r)
	case strings.HasSuffix(tarball, ".gz"):
		if r, err = gzip.NewReader(r); err != nil {
			return "", fmt.Errorf("importing %s: %w", tarball, err)
		}
	case strings.HasSuffix(tarball, ".tar"):
	default:
		return "", fmt.Errorf("importing %s: unsupported compression (want .tar.bz2, .tar.gz or .tar)", tarball)
	}
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		return "", fmt.Errorf("importing PostgreSQL source into %s: %w", dir, err)
	}
	root := newDirNode()
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", tarball, err)
		}
		name := strings.TrimPrefix(path.Clean(h.Name), "./")
		_, rest, ok := strings.Cut(name, "/")
		if !ok || rest == "" {
			continue // the top-level directory itself
		}
		var mode filemode.FileMode
		var data []byte
		switch h.Typeflag {
		case tar.TypeReg:
			mode = filemode.Regular
			if h.Mode&0o111 != 0 {
				mode = filemode.Executable
			}
			if data, err = io.ReadAll(tr); err != nil {
				return "", fmt.Errorf("reading %s from %s: %w", name, tarball, err)
			}
		case tar.TypeSymlink:
			mode, data = filemode.Symlink, []byte(h.Linkname)
		default:
			continue // directories are implied; nothing else is in a source tarball
		}
		hash, err := storeBlob(repo.Storer, data)
		if err != nil {
			return "", fmt.Errorf("importing %s: %w", name, err)
		}
		root.set(strings.Split(rest, "/"), mode, hash)
	}
	tree, err := root.store(repo.Storer)
	if err != nil {
		return "", fmt.Errorf("importing %s: %w", tarball, err)
	}
	msg := fmt.Sprintf("Import %s\n", filepath.Base(tarball))
	hash, err := storeCommit(repo.Storer, tree, nil, msg, BaseDate)
	if err != nil {
		return "", fmt.Errorf("importing %s: %w", tarball, err)
	}
	if err := setBranch(repo, hash); err != nil {
		return "", err
	}
	return hash.String(), nil
}

// Delete, returned by an edit function, deletes the file.
var Delete = errors.New("delete this file")

// Commit adds a commit to the repository at dir on top of Branch (which it
// advances) and returns its hash. edits maps slash-separated paths to
// functions that get the file's current content ("" for a new file) and
// return the new content; a nil function, or one returning Delete, deletes
// the file. The commit is authored by Author at when, so the same edits on
// the same parent always give the same hash.
func Commit(dir, msg string, when time.Time, edits map[string]func(old string) (string, error)) (string, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return "", fmt.Errorf("fixture commit: %w", err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName(Branch), true)
	if err != nil {
		return "", fmt.Errorf("fixture commit: branch %s: %w", Branch, err)
	}
	parent, err := repo.CommitObject(ref.Hash())
	if err != nil {
		return "", fmt.Errorf("fixture commit: %w", err)
	}
	tree, err := parent.Tree()
	if err != nil {
		return "", fmt.Errorf("fixture commit: %w", err)
	}
	root, err := loadDir(repo.Storer, tree.Hash)
	if err != nil {
		return "", fmt.Errorf("fixture commit: %w", err)
	}
	paths := make([]string, 0, len(edits))
	for p := range edits {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		elems := strings.Split(path.Clean(p), "/")
		edit := edits[p]
		old, mode, exists, err := root.read(repo.Storer, elems)
		if err != nil {
			return "", fmt.Errorf("fixture commit: reading %s: %w", p, err)
		}
		if edit == nil {
			root.remove(elems)
			continue
		}
		content, err := edit(old)
		if errors.Is(err, Delete) {
			root.remove(elems)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("fixture commit: editing %s: %w", p, err)
		}
		if !exists {
			mode = filemode.Regular
		}
		h, err := storeBlob(repo.Storer, []byte(content))
		if err != nil {
			return "", fmt.Errorf("fixture commit: %w", err)
		}
		if err := root.setLoaded(repo.Storer, elems, mode, h); err != nil {
			return "", fmt.Errorf("fixture commit: %s: %w", p, err)
		}
	}
	newTree, err := root.store(repo.Storer)
	if err != nil {
		return "", fmt.Errorf("fixture commit: %w", err)
	}
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	hash, err := storeCommit(repo.Storer, newTree, []plumbing.Hash{parent.Hash}, msg, when)
	if err != nil {
		return "", fmt.Errorf("fixture commit: %w", err)
	}
	if err := setBranch(repo, hash); err != nil {
		return "", err
	}
	return hash.String(), nil
}

func setBranch(repo *git.Repository, hash plumbing.Hash) error {
	name := plumbing.NewBranchReferenceName(Branch)
	if err := repo.Storer.SetReference(plumbing.NewHashReference(name, hash)); err != nil {
		return fmt.Errorf("setting %s: %w", Branch, err)
	}
	if err := repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, name)); err != nil {
		return fmt.Errorf("setting HEAD: %w", err)
	}
	return nil
}

func storeBlob(s storer.EncodedObjectStorer, data []byte) (plumbing.Hash, error) {
	obj := s.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(data)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(data); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}

func storeCommit(s storer.EncodedObjectStorer, tree plumbing.Hash, parents []plumbing.Hash, msg string, when time.Time) (plumbing.Hash, error) {
	sig := Author
	sig.When = when.UTC()
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: tree, ParentHashes: parents}
	obj := s.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}
