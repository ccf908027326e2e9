package build

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/pgbisect/pgbisect/internal/base/pgversion"
)

// Tree describes what the builder needs to know about a source tree: its
// PostgreSQL version and which build systems it has.
type Tree struct {
	// Version is read from AC_INIT in configure.ac (configure.in before
	// PostgreSQL 11) or from project(..., version: ...) in meson.build.
	// Its Num is 0 when neither file names one.
	Version pgversion.Version
	// Configure is true when the tree has a configure script.
	Configure bool
	// Meson is true when the tree has meson.build (PostgreSQL 16 and later).
	Meson bool
}

var (
	acInitRe = regexp.MustCompile(`AC_INIT\(\s*\[PostgreSQL\]\s*,\s*\[([^\]]+)\]`)
	mesonRe  = regexp.MustCompile(`(?s)project\(\s*'postgresql'.*?version\s*:\s*'([^']+)'`)
)

// ParseTreeVersion finds the version in the text of configure.ac (or
// configure.in) and of meson.build; either may be nil. configure.ac wins
// when both name one, as they always agree in PostgreSQL's own trees.
func ParseTreeVersion(configureAC, mesonBuild []byte) (pgversion.Version, error) {
	if m := acInitRe.FindSubmatch(configureAC); m != nil {
		return pgversion.Parse(string(m[1]))
	}
	if m := mesonRe.FindSubmatch(mesonBuild); m != nil {
		return pgversion.Parse(string(m[1]))
	}
	return pgversion.Version{}, fmt.Errorf("no PostgreSQL version in configure.ac or meson.build")
}

// readTree reads the Tree of a commit from the repository (no checkout).
// A tree whose version cannot be read gets Version.Num 0: it is built
// with the configured options alone.
func readTree(r *Repo, commit string) (Tree, error) {
	c, err := r.repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return Tree{}, fmt.Errorf("reading commit %s: %w", Short(commit), err)
	}
	tree, err := c.Tree()
	if err != nil {
		return Tree{}, fmt.Errorf("reading the tree of %s: %w", Short(commit), err)
	}
	var t Tree
	_, err = tree.FindEntry("configure")
	t.Configure = err == nil
	mesonText, err := blobText(tree, "meson.build", 4096)
	t.Meson = err == nil
	var acText []byte
	for _, p := range []string{"configure.ac", "configure.in"} {
		if acText, err = blobText(tree, p, 4096); err == nil {
			break
		}
	}
	if v, err := ParseTreeVersion(acText, mesonText); err == nil {
		t.Version = v
	}
	return t, nil
}

// blobText returns the first max bytes of a file in tree.
func blobText(tree *object.Tree, path string, max int64) ([]byte, error) {
	f, err := tree.File(path)
	if err != nil {
		return nil, err
	}
	rd, err := f.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(io.LimitReader(rd, max))
}

// commonBefore is the first version whose tree links with GCC 10's default
// -fno-common. Release branches got fixes for duplicate global definitions
// backpatched, but a commit on master from before then did not, and
// bisection builds exactly those. -fcommon restores what GCC did until 9,
// which those trees were written and measured with.
var commonBefore = pgversion.Version{Num: 130000}

// CompatCFLAGS returns the compiler flags a tree of version v needs with
// today's toolchain, or "" for a tree that needs none (including one whose
// version is unknown):
//
//   - before 13: -fcommon (GCC 10 and later default to -fno-common, which
//     turns old trees' tentative definitions of the same global in several
//     files into "multiple definition" link errors);
//   - before 13: -Wno-error=implicit-function-declaration,
//     -Wno-error=int-conversion and -Wno-error=incompatible-pointer-types,
//     so that old C (in the code and in autoconf 2.69's own configure
//     tests) stays a warning: GCC 12, the compiler here, only warns about
//     these already, GCC 14 and later make them errors.
//
// PostgreSQL never adds -Werror itself, so warnings are otherwise not
// fatal. Trees of 13 and later need nothing, so their build keys (and the
// builds already cached) are unchanged.
func CompatCFLAGS(v pgversion.Version) string {
	if v.Num == 0 || v.Num >= commonBefore.Num {
		return ""
	}
	return strings.Join([]string{
		"-fcommon",
		"-Wno-error=implicit-function-declaration",
		"-Wno-error=int-conversion",
		"-Wno-error=incompatible-pointer-types",
	}, " ")
}

// ForTree returns the options a tree is built with: o, plus the
// compatibility flags of its version, plus Meson when the tree has
// meson.build and no configure script (meson is then the only way to
// build it). A tree with neither keeps o and fails to build with a clear
// message.
func (o Options) ForTree(t Tree) Options {
	n := o
	n.CompatCFLAGS = CompatCFLAGS(t.Version)
	if !t.Configure && t.Meson {
		n.Meson = true
	}
	return n
}

// configureCFLAGS is the CFLAGS given to configure: the user's, followed
// by the compatibility flags. configure uses CFLAGS instead of its default
// -O2 when it is set, so -O2 comes first when the user gave none.
func (o Options) configureCFLAGS() string {
	user := strings.TrimSpace(o.CFLAGS)
	switch {
	case o.CompatCFLAGS == "":
		return user
	case user == "":
		return "-O2 " + o.CompatCFLAGS
	default:
		return user + " " + o.CompatCFLAGS
	}
}

// mesonCArgs is meson's c_args: the user's CFLAGS and the compatibility
// flags (meson adds its own optimization level besides).
func (o Options) mesonCArgs() string {
	return strings.TrimSpace(strings.TrimSpace(o.CFLAGS) + " " + o.CompatCFLAGS)
}
