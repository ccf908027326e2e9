package build

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// checkTools reports, before any build starts, the tools and headers a
// build with opts needs and the machine lacks.
func checkTools(ctx context.Context, opts Options) error {
	var tools, pkgs []string
	need := func(ok bool, tool, pkg string) {
		if !ok {
			tools = append(tools, tool)
			if !slices.Contains(pkgs, pkg) {
				pkgs = append(pkgs, pkg)
			}
		}
	}
	has := func(name string) bool { _, err := exec.LookPath(name); return err == nil }
	cc := has("gcc") || has("cc")
	need(cc, "a C compiler (gcc)", "gcc")
	if opts.Meson {
		need(has("meson"), "meson", "meson")
		need(has("ninja"), "ninja", "ninja-build")
	} else {
		need(has("make"), "make", "make")
	}
	need(has("bison"), "bison", "bison")
	need(has("flex"), "flex", "flex")
	need(has("perl"), "perl", "perl")
	flags := strings.Join(append(append([]string{}, opts.Configure...), opts.MesonOptions...), " ")
	if cc && !strings.Contains(flags, "--without-readline") && !strings.Contains(flags, "readline=disabled") {
		need(hasHeader(ctx, "readline/readline.h") || hasHeader(ctx, "editline/readline.h"), "readline headers", "libreadline-dev")
	}
	if cc && !strings.Contains(flags, "--without-zlib") && !strings.Contains(flags, "zlib=disabled") {
		need(hasHeader(ctx, "zlib.h"), "zlib headers", "zlib1g-dev")
	}
	if len(tools) > 0 {
		return &MissingToolsError{Tools: tools, Packages: pkgs}
	}
	return nil
}

// hasHeader looks for a header in /usr/include, then asks the compiler
// (which knows other include directories).
func hasHeader(ctx context.Context, header string) bool {
	if _, err := os.Stat(filepath.Join("/usr/include", header)); err == nil {
		return true
	}
	compiler := "gcc"
	if _, err := exec.LookPath(compiler); err != nil {
		compiler = "cc"
	}
	cmd := proc.Command(ctx, nil, compiler, "-E", "-x", "c", "-o", os.DevNull, "-")
	cmd.Stdin = strings.NewReader(fmt.Sprintf("#include <%s>\n", header))
	return cmd.Run() == nil
}

// ccache returns "ccache" when it is installed.
func ccache() string {
	if _, err := exec.LookPath("ccache"); err == nil {
		return "ccache"
	}
	return ""
}

// checkReachable makes sure an unprivileged user (the server runs as one
// when pgbisect runs as root) can reach dir: every ancestor must be
// searchable by others.
func checkReachable(dir string) error {
	if !proc.IsRoot() {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for d := abs; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil && fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("state directory %s is not reachable by the unprivileged user that runs the server: %s has mode %#o; run chmod o+x %s or choose another --state", dir, d, fi.Mode().Perm(), d)
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}
