package proc

import (
	"os"
	"strings"
)

// allowedEnv names the variables of pgbisect's own environment that a
// child may see; a trailing "*" matches a prefix. Everything else (the
// GitHub token, database URLs and passwords, cloud credentials) stays in
// pgbisect. The build variables are here because a machine's owner sets
// them on purpose (a ccache directory, a compiler, flags).
var allowedEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR",
	"LANG", "LANGUAGE", "LC_*",
	"CCACHE_*", "CC", "CXX", "CPP", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "LIBS",
	"MAKEFLAGS", "MAKELEVEL", "MFLAGS", "PKG_CONFIG", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR",
	"PERL", "PERL5LIB", "PYTHON", "BISON", "FLEX", "LLVM_CONFIG", "CLANG",
	"SOURCE_DATE_EPOCH", "DISTCC_*",
}

// Allowed reports whether a variable named name may reach a child.
func Allowed(name string) bool {
	for _, a := range allowedEnv {
		if p, ok := strings.CutSuffix(a, "*"); ok {
			if strings.HasPrefix(name, p) {
				return true
			}
		} else if name == a {
			return true
		}
	}
	return false
}

// Env returns the allowlisted part of pgbisect's environment followed by
// extra ("KEY=value"; a later entry wins, as os/exec keeps the last of
// duplicate keys). Every child pgbisect starts gets an environment from
// Env or one built from nothing, never os.Environ().
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if Allowed(k) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}
