package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/base/pgversion"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// The version lines below are copied from PostgreSQL's own trees:
// configure.in of master during 9.6 development (2016), configure.ac of
// the 15.18 release (the fixture) and meson.build of master during 17
// development.
const (
	configureIn96  = "dnl Process this file with autoconf to produce a configure script.\ndnl configure.in\nAC_INIT([PostgreSQL], [9.6devel], [pgsql-bugs@postgresql.org])\n"
	configureAC15  = "dnl Process this file with autoconf to produce a configure script.\ndnl configure.ac\nAC_INIT([PostgreSQL], [15.18], [pgsql-bugs@lists.postgresql.org], [], [https://www.postgresql.org/])\n"
	configureAC12  = "AC_INIT([PostgreSQL], [12devel], [pgsql-bugs@postgresql.org])\n"
	mesonBuild17   = "# Copyright (c) 2022-2023, PostgreSQL Global Development Group\n\nproject('postgresql',\n  ['c'],\n  version: '17devel',\n  license: 'PostgreSQL',\n  meson_version: '>=0.54',\n)\n"
	configureAC17  = "AC_INIT([PostgreSQL], [17devel], [pgsql-bugs@lists.postgresql.org], [], [https://www.postgresql.org/])\n"
	mesonBuildNoPG = "project('something', ['c'], version: '1.0')\n"
)

func TestParseTreeVersion(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ac, meson string
		want      int
	}{
		{"9.6 configure.in", configureIn96, "", 90600},
		{"15.18 configure.ac", configureAC15, "", 150018},
		{"17 meson.build", "", mesonBuild17, 170000},
		{"17 both", configureAC17, mesonBuild17, 170000},
	} {
		v, err := ParseTreeVersion([]byte(tc.ac), []byte(tc.meson))
		if err != nil || v.Num != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, v.Num, err, tc.want)
		}
	}
	if _, err := ParseTreeVersion(nil, []byte(mesonBuildNoPG)); err == nil {
		t.Error("a meson.build of another project gave a version")
	}
}

func TestCompatFlagsByVersion(t *testing.T) {
	for _, tc := range []struct {
		ac       string
		fcommon  bool
		cflags   string // CFLAGS given to configure with no user CFLAGS
		userOpts Options
	}{
		{configureIn96, true, "-O2 -fcommon -Wno-error=implicit-function-declaration -Wno-error=int-conversion -Wno-error=incompatible-pointer-types", Options{}},
		{configureAC12, true, "-O0 -g -fcommon -Wno-error=implicit-function-declaration -Wno-error=int-conversion -Wno-error=incompatible-pointer-types", Options{CFLAGS: "-O0 -g"}},
		{configureAC15, false, "", Options{}},
		{configureAC15, false, "-O0", Options{CFLAGS: "-O0"}},
	} {
		v, err := ParseTreeVersion([]byte(tc.ac), nil)
		if err != nil {
			t.Fatal(err)
		}
		o := tc.userOpts.ForTree(Tree{Version: v, Configure: true})
		if got := strings.Contains(o.CompatCFLAGS, "-fcommon"); got != tc.fcommon {
			t.Errorf("%s: -fcommon %v, want %v", v, got, tc.fcommon)
		}
		if got := o.configureCFLAGS(); got != tc.cflags {
			t.Errorf("%s with CFLAGS %q: configure gets CFLAGS %q, want %q", v, tc.userOpts.CFLAGS, got, tc.cflags)
		}
		// Trees that need nothing keep the options, and so their keys.
		if !tc.fcommon && o.Hash() != tc.userOpts.Hash() {
			t.Errorf("%s: options hash changed from %s to %s", v, tc.userOpts.Hash(), o.Hash())
		}
		if tc.fcommon && o.Hash() == tc.userOpts.Hash() {
			t.Errorf("%s: compatibility flags do not change the options hash", v)
		}
	}
	// An unknown version gets nothing.
	if o := (Options{}).ForTree(Tree{Configure: true}); o.CompatCFLAGS != "" {
		t.Errorf("unknown version got %q", o.CompatCFLAGS)
	}
}

// TestKeyByTreeVersion checks that the key of a commit is made with the
// options of its own tree: an old tree's key includes its compatibility
// flags, a tree without configure its meson build, and a 15 tree the
// plain options (the key the builds already cached have).
func TestKeyByTreeVersion(t *testing.T) {
	r := newTestRepo(t)
	base := map[string]string{"src/backend/main.c": "int main(void) { return 0; }\n"}
	c96 := r.commit("9.6 tree", nil, with(base, "configure", "#!/bin/sh\n", "configure.in", configureIn96))
	c15 := r.commit("15 tree", []string{c96}, with(base, "configure", "#!/bin/sh\n", "configure.ac", configureAC15))
	c17 := r.commit("17 tree, both", []string{c15}, with(base, "configure", "#!/bin/sh\n", "configure.ac", configureAC17, "meson.build", mesonBuild17))
	c18 := r.commit("meson only", []string{c17}, with(base, "meson.build", strings.Replace(mesonBuild17, "17devel", "18devel", 1)))
	repo := r.open()
	b := NewBuilder(repo, t.TempDir(), Options{}, nil, nil)
	plain := Options{}.Hash()
	meson := Options{Meson: true}.Hash()
	for _, tc := range []struct {
		name, commit, opts string
	}{
		{"9.6", c96, Options{CompatCFLAGS: CompatCFLAGS(mustVersion(t, "9.6devel"))}.Hash()},
		{"15", c15, plain},
		{"17 with configure", c17, plain},
		{"18 without configure", c18, meson},
	} {
		k, err := b.Key(context.Background(), tc.commit)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if want := tc.commit + "-" + tc.opts; k.ID != want {
			t.Errorf("%s: key %s, want %s", tc.name, k.ID, want)
		}
	}
}

// TestMesonCommands builds a tree that has meson.build and no configure,
// with programs named meson and ninja that record their command lines, and
// checks the setup, compile and install commands. Only a PostgreSQL 15
// tree (which has no meson.build) is available to build for real, so this
// is how the meson path is tested.
func TestMesonCommands(t *testing.T) {
	fake := t.TempDir()
	logFile := filepath.Join(fake, "commands")
	script := `#!/bin/sh
echo "$(basename "$0") dir=$PWD LDFLAGS=$LDFLAGS args=$*" >> ` + logFile + `
if [ "$(basename "$0")" = meson ]; then
	case "$1" in
	setup)
		for a; do bdir=$prev; prev=$a; done
		mkdir -p "$bdir" && : > "$bdir/build.ninja" ;;
	install)
		while [ $# -gt 0 ]; do [ "$1" = --destdir ] && dest=$2; shift; done
		mkdir -p "$dest/pgbisect/bin" && echo fake > "$dest/pgbisect/bin/postgres" ;;
	esac
fi
`
	for _, name := range []string{"meson", "ninja"} {
		if err := os.WriteFile(filepath.Join(fake, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", fake+":"+os.Getenv("PATH"))
	t.Setenv("CCACHE_DISABLE", "1")

	r := newTestRepo(t)
	files := map[string]string{"src/backend/main.c": "int main(void) { return 0; }\n",
		"meson.build": strings.Replace(mesonBuild17, "17devel", "18devel", 1)}
	c := r.commit("a tree without configure", nil, files)
	state := t.TempDir()
	// The state directory must be reachable by the server's user.
	if err := os.Chmod(filepath.Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	b := NewBuilder(r.open(), state, Options{CFLAGS: "-O1", MesonOptions: []string{"cassert=true"}, Jobs: 3}, nil, nil)
	inst, err := b.Build(context.Background(), c)
	if err != nil {
		var mt *MissingToolsError
		if errors.As(err, &mt) {
			citest.Unavailable(t, "build tools missing: %v", err)
		}
		t.Fatal(err)
	}
	if !inst.Options.Meson {
		t.Errorf("install options %s: not built with meson", inst.Options)
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	key, _ := b.Key(context.Background(), c)
	// The worktree of the tree's options and release (18devel: 18).
	wt := filepath.Join(state, "worktrees", Options{CFLAGS: "-O1", MesonOptions: []string{"cassert=true"}, Meson: true}.Hash()+"-18")
	bdir := filepath.Join(wt, "meson-build")
	want := []string{
		"meson dir=" + wt + " LDFLAGS=-Wl,-rpath,$ORIGIN/../lib:$ORIGIN/.. args=setup --prefix=/pgbisect --libdir=lib -Drpath=false -Dcassert=true -Dc_args=-O1 " + bdir + " " + filepath.Join(wt, "src"),
		"ninja dir=" + bdir + " LDFLAGS= args=-j 3",
		"meson dir=" + bdir + " LDFLAGS= args=install --no-rebuild --quiet --destdir " + filepath.Join(state, "builds", ".tmp", key.ID, "stage"),
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat(filepath.Join(inst.BinDir(), "postgres")); err != nil {
		t.Errorf("install: %v", err)
	}

	// A tree with configure and no meson.build cannot be built with meson.
	c2 := r.commit("a configure tree", []string{c}, map[string]string{"configure": "#!/bin/sh\nexit 1\n", "configure.ac": configureAC15})
	bm := NewBuilder(r.open(), state, Options{Meson: true}, nil, nil)
	if _, err := bm.Build(context.Background(), c2); err == nil || !strings.Contains(err.Error(), "no meson.build") {
		t.Errorf("meson build of a tree without meson.build: %v", err)
	}
}

func mustVersion(t *testing.T, s string) pgversion.Version {
	t.Helper()
	v, err := pgversion.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
