package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionLine: the module version, the VCS revision with its time and
// the dirty mark, and the Go version, from the build info.
func TestVersionLine(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/pgbisect/pgbisect", Version: "v0.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "6327011abcdef"}, {Key: "vcs.time", Value: "2026-12-03T06:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	want := "pgbisect v0.4.0 (revision 6327011abcdef+modified, 2026-12-03T06:00:00Z) built with go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH
	if got := versionLine(info); got != want {
		t.Errorf("versionLine = %q\nwant           %q", got, want)
	}
	if got := versionLine(nil); !strings.HasPrefix(got, "pgbisect unknown built with "+runtime.Version()) {
		t.Errorf("versionLine(nil) = %q", got)
	}
}

// TestVersionFlag: --version and the version command print the same line
// and exit 0.
func TestVersionFlag(t *testing.T) {
	var lines []string
	for _, args := range [][]string{{"--version"}, {"version"}, {"-version"}} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
		}
		lines = append(lines, out.String())
	}
	if !strings.HasPrefix(lines[0], "pgbisect ") || !strings.Contains(lines[0], runtime.Version()) || lines[0] != lines[1] || lines[1] != lines[2] {
		t.Errorf("outputs %q", lines)
	}
}

// TestVersionOfBuiltBinary builds cmd/pgbisect with the go command, as a
// user does from a checkout, and checks that --version names the
// checkout's commit (stamped by the go command's VCS support).
func TestVersionOfBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the pgbisect binary; skipped with -short")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	// The go command stamps no VCS information in a linked work tree
	// (git worktree add: .git is a file); CI's clone is a plain one.
	if st, err := os.Stat("../../../.git"); err != nil || !st.IsDir() {
		t.Skip("a git worktree: the go command does not stamp its revision")
	}
	bin := filepath.Join(t.TempDir(), "pgbisect")
	build := exec.Command("go", "build", "-o", bin, "../../../cmd/pgbisect")
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("pgbisect --version: %v", err)
	}
	if !strings.Contains(string(out), "revision "+strings.TrimSpace(string(head))) || !strings.Contains(string(out), runtime.Version()) {
		t.Errorf("pgbisect --version = %q, want the revision %s and %s", out, strings.TrimSpace(string(head)), runtime.Version())
	}
}
