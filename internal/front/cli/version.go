package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

func init() {
	register(command{
		Name:    "version",
		Summary: "print pgbisect's version, the commit it was built from and the Go version (same as --version)",
		Run: func(ctx context.Context, env *Env) error {
			fs := newFlags(env, "version", "")
			if err := parseNoArgs(fs, env, ""); err != nil {
				return err
			}
			info, _ := debug.ReadBuildInfo()
			fmt.Fprintln(env.Stdout, versionLine(info))
			return nil
		},
	})
}

// versionLine is what 'pgbisect --version' prints: the module version
// ("(devel)" for a build from a checkout), the VCS revision and commit
// time the go command stamped, "+modified" for a dirty work tree, and the
// Go version and platform it was built with. info may be nil (a binary
// built without module support).
func versionLine(info *debug.BuildInfo) string {
	version, goVersion := "unknown", runtime.Version()
	var rev, when, modified string
	if info != nil {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = "+modified"
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pgbisect %s", version)
	if rev != "" {
		fmt.Fprintf(&b, " (revision %s%s", rev, modified)
		if when != "" {
			fmt.Fprintf(&b, ", %s", when)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " built with %s %s/%s", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}
