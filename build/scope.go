package build

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// What a configure build makes and installs unless Options.All is set:
// the programs pgbisect runs (postgres, initdb, pg_ctl, psql, pgbench)
// and everything they need at run time, in the order make must build
// them. Every directory is made and installed on its own (make -C dir,
// make -C dir install); each makes the libraries it links itself (the
// submake rules of PostgreSQL's Makefiles).
//
//   - src/port, src/common, src/fe_utils: the libraries everything links.
//   - src/timezone: zic and the time zone data initdb and the server read.
//   - src/backend: the server, its catalog data, the sample configuration
//     files; conversion_procs and snowball: the shared libraries initdb's
//     scripts create functions for; libpqwalreceiver and pgoutput:
//     replication's modules.
//   - src/interfaces/libpq, src/pl (PL/pgSQL, which initdb installs, and
//     whatever languages configure enabled).
//   - src/bin/{initdb,pg_ctl,psql,pgbench}; contrib/pgbench where pgbench
//     still lived there (9.6).
//
// Left out: ecpg, pg_dump, pg_basebackup, pg_upgrade, pg_rewind and the
// other client programs, src/test's programs, the headers and PGXS files
// for building extensions. No scenario runs them, and a full build spent
// about a tenth of its compiles on them.
var measuredDirs = []string{
	"src/port", "src/common", "src/timezone", "src/backend",
	"src/backend/utils/mb/conversion_procs", "src/backend/snowball",
	"src/interfaces/libpq", "src/backend/replication/libpqwalreceiver",
	"src/backend/replication/pgoutput", "src/fe_utils", "src/pl",
	"src/bin/initdb", "src/bin/pg_ctl", "src/bin/psql", "src/bin/pgbench",
	"contrib/pgbench",
}

// measuredBin are the client programs of measuredDirs.
var measuredBin = map[string]bool{"initdb": true, "pg_ctl": true, "psql": true, "pgbench": true}

var contribName = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// CheckContrib returns an error naming the first module name of contrib
// that cannot be a contrib directory.
func CheckContrib(contrib []string) error {
	for _, c := range contrib {
		if !contribName.MatchString(c) {
			return fmt.Errorf("build.contrib: %q is not a contrib module's name (lower-case letters, digits and _, as in pg_stat_statements)", c)
		}
	}
	return nil
}

// makeDirs returns the build directories (relative, slash-separated) a
// configure build of the source tree src makes and installs one by one, in
// order: measuredDirs and then o.Contrib, or only o.Contrib when o.All
// (which makes and installs the whole tree at the top first). Directories
// the tree lacks are left out; a contrib module it lacks is an error.
func makeDirs(src string, o Options) ([]string, error) {
	if err := CheckContrib(o.Contrib); err != nil {
		return nil, err
	}
	var dirs []string
	if !o.All {
		for _, d := range measuredDirs {
			if exists(filepath.Join(src, filepath.FromSlash(d), "Makefile")) {
				dirs = append(dirs, d)
			}
		}
	}
	if !o.All && !slices.Contains(dirs, "src/backend") {
		// Not PostgreSQL's layout (a test's tree): made at the top, whole.
		return nil, nil
	}
	for _, c := range o.Contrib {
		d := "contrib/" + c
		if !exists(filepath.Join(src, "contrib", c, "Makefile")) {
			return nil, fmt.Errorf("build.contrib names %s, which this tree does not have", d)
		}
		dirs = append(dirs, d)
	}
	return dirs, nil
}

// measuredIgnores reports whether a configure build under o never reads
// p: meson's files always; without o.All, the sources of what it does not
// make (measuredDirs).
func measuredIgnores(p string, o Options) bool {
	if mesonFile(p) {
		return true
	}
	if o.All {
		return false
	}
	for _, prefix := range []string{"src/interfaces/ecpg/", "src/test/", "src/tutorial/"} {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	// A file in a directory below src/bin or contrib belongs to that
	// program or module; the files directly in contrib (contrib-global.mk)
	// are read by every module made.
	if rest, ok := strings.CutPrefix(p, "src/bin/"); ok {
		d, _, _ := strings.Cut(rest, "/")
		return !measuredBin[d]
	}
	if rest, ok := strings.CutPrefix(p, "contrib/"); ok {
		d, _, sub := strings.Cut(rest, "/")
		return sub && d != "pgbench" && !slices.Contains(o.Contrib, d)
	}
	return false
}
