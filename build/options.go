package build

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path"
	"runtime"
	"slices"
	"strings"
)

// Options are the build options. Those that change the binaries (Configure,
// CFLAGS, Meson, MesonOptions, CompatCFLAGS) are part of every build key;
// Jobs and NoCompile are not.
//
// The yaml keys are the build section of pgbisect's config file, which
// holds an Options (CompatCFLAGS is the tree's, never the file's).
type Options struct {
	// Configure holds extra configure flags; --prefix and --enable-depend
	// are always added.
	Configure []string `json:"configure,omitempty" yaml:"configure"`
	// CFLAGS is passed to configure (or meson as c_args).
	CFLAGS string `json:"cflags,omitempty" yaml:"cflags"`
	// Meson builds with meson and ninja; the tree must have meson.build.
	Meson bool `json:"meson,omitempty" yaml:"meson"`
	// MesonOptions are extra -D options for meson setup.
	MesonOptions []string `json:"meson_options,omitempty" yaml:"meson_options"`
	// CompatCFLAGS are the compiler flags the tree's version needs with
	// today's toolchain (see CompatCFLAGS); ForTree sets them per tree,
	// so they are part of the key of the builds that need them and absent
	// (leaving keys unchanged) for those that do not.
	CompatCFLAGS string `json:"compat_cflags,omitempty" yaml:"-"`
	// All makes and installs the whole tree, as a plain make && make
	// install does (contrib excepted). Without it a configure build makes
	// and installs only what pgbisect runs (measuredDirs, scope.go): the server,
	// initdb, pg_ctl, psql, pgbench, libpq, the procedural languages and
	// what those need at run time; commits that change only the rest
	// (ecpg, pg_dump, pg_upgrade, the other client programs, the test
	// programs) then build as their parent. Meson builds build everything.
	All bool `json:"all,omitempty" yaml:"all"`
	// Contrib names contrib modules to make and install as well (e.g.
	// pg_stat_statements) in a configure build; meson builds them all.
	Contrib []string `json:"contrib,omitempty" yaml:"contrib"`
	// Jobs is make's or ninja's parallelism; 0 means the number of CPUs.
	Jobs int `json:"-" yaml:"jobs"`
	// NoCompile lists path patterns whose changes cannot change the
	// install; nil means DefaultNoCompile. See MatchPath for the syntax.
	NoCompile []string `json:"-" yaml:"no_compile"`
}

// DefaultNoCompile are the paths that are neither compiled nor installed by
// a default build: documentation, regression test inputs and expected
// outputs, TAP tests, translations and README files.
var DefaultNoCompile = []string{
	"doc/**",
	"src/test/regress/sql/**",
	"src/test/regress/expected/**",
	"src/test/regress/input/**",
	"src/test/regress/output/**",
	"src/test/regress/data/**",
	"src/test/isolation/specs/**",
	"src/test/isolation/expected/**",
	"**/t/*.pl",
	"contrib/**/sql/**",
	"contrib/**/expected/**",
	"**/po/**",
	"**/README",
	"**/README.*",
	"**/*.md",
	"**/.gitignore",
	".gitattributes",
	".git-blame-ignore-revs",
	".editorconfig",
	".cirrus.*",
	".cirrus/**",
	".github/**",
	"src/tools/pgindent/**",
	"src/tools/msvc/**",
	"src/tools/ci/**",
}

// schemeVersion changes when the way pgbisect builds changes in a way that
// changes installs, so old cache entries stop matching.
// 2: configure builds make and install only what pgbisect runs unless
// Options.All.
const schemeVersion = "2"

// Hash returns a short hash (12 hex digits) of the options that change the
// binaries. It names the worktree and is part of every build key.
func (o Options) Hash() string {
	data, _ := json.Marshal(struct {
		Scheme string
		Options
	}{schemeVersion, o.normalized()})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// normalized makes options that build the same thing compare equal.
func (o Options) normalized() Options {
	n := Options{CFLAGS: strings.TrimSpace(o.CFLAGS), Meson: o.Meson, CompatCFLAGS: o.CompatCFLAGS}
	if len(o.Configure) > 0 {
		n.Configure = o.Configure
	}
	if o.Meson && len(o.MesonOptions) > 0 {
		n.MesonOptions = o.MesonOptions
	}
	if !o.Meson {
		n.All = o.All
		if len(o.Contrib) > 0 {
			n.Contrib = slices.Sorted(slices.Values(o.Contrib))
			n.Contrib = slices.Compact(n.Contrib)
		}
	}
	return n
}

// String describes the options for listings: "configure --foo CFLAGS=-O0".
func (o Options) String() string {
	var parts []string
	if o.Meson {
		parts = append(parts, "meson")
		parts = append(parts, o.MesonOptions...)
	} else {
		parts = append(parts, "configure")
		parts = append(parts, o.Configure...)
		if o.All {
			parts = append(parts, "all")
		}
		for _, c := range o.Contrib {
			parts = append(parts, "contrib/"+c)
		}
	}
	if o.CFLAGS != "" {
		parts = append(parts, "CFLAGS="+o.CFLAGS)
	}
	if o.CompatCFLAGS != "" {
		parts = append(parts, "compat="+strings.ReplaceAll(o.CompatCFLAGS, " ", ","))
	}
	return strings.Join(parts, " ")
}

func (o Options) jobs() int {
	if o.Jobs > 0 {
		return o.Jobs
	}
	return runtime.NumCPU()
}

func (o Options) noCompile() []string {
	if o.NoCompile == nil {
		return DefaultNoCompile
	}
	return o.NoCompile
}

// MatchPath reports whether the slash-separated file path p matches
// pattern. Patterns are path.Match globs per path element, where an element
// "**" matches any number of elements (including none).
func MatchPath(pattern, p string) bool {
	return matchElems(strings.Split(pattern, "/"), strings.Split(p, "/"))
}

func matchElems(pat, p []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for i := 0; i <= len(p); i++ {
				if matchElems(rest, p[i:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], p[0]); err != nil || !ok {
			return false
		}
		pat, p = pat[1:], p[1:]
	}
	return len(p) == 0
}

// compiled reports whether changing p can change a build.
func compiled(p string, noCompile []string) bool {
	for _, pat := range noCompile {
		if MatchPath(pat, p) {
			return false
		}
	}
	return true
}

// mesonFile reports whether p is one of meson's build files, which
// configure and make never read.
func mesonFile(p string) bool {
	switch path.Base(p) {
	case "meson.build", "meson_options.txt", "meson.options":
		return true
	}
	return false
}
