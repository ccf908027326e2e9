// Package citest ends a test that cannot run on this machine for want of a
// tool, a user or a privilege: on a developer's machine it is skipped,
// under CI=true it fails, saying what is missing and what installs it. CI
// runs scripts/setup-debian.sh as root, so there a missing prerequisite is
// a broken setup, and a skip would let a guarantee drop out of CI with
// nothing failing.
//
// Only tests import it (the binary links no test-support package).
package citest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// CI reports whether the tests run in CI (CI=true).
func CI() bool { return os.Getenv("CI") == "true" }

// Unavailable ends t: a failure under CI=true, a skip elsewhere. The
// message (format and args, as fmt.Sprintf) says what is missing and what
// to do.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("%s [CI=true: this test must run]", msg)
		return
	}
	t.Skip(msg)
}

// Tool returns the path of the executable name on PATH, or ends t
// (Unavailable) saying that install installs it.
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, "%s is not installed: %s (scripts/setup-debian.sh installs it)", name, install)
	}
	return path
}

// Root ends t (Unavailable) unless it runs as root; why says what needs
// root.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "needs root: %s (CI runs the tests as root)", why)
	}
}
