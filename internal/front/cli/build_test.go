package cli

import (
	"bytes"
	"context"
	"github.com/pgbisect/pgbisect/internal/base/proc"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"

	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/front/config"
)

func buildMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), append([]string{"build"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestBuildUsage(t *testing.T) {
	state := t.TempDir()
	for _, tt := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--state", state}, 2, "give at least one revision"},
		{[]string{"--state", state, "--list", "--prune"}, 2, "do not go together"},
		{[]string{"--state", state, "--prune"}, 2, "needs --max-age or --max-size"},
		{[]string{"--state", state, "--list", "master"}, 2, "take no revisions"},
		{[]string{"--state", state, "--repo", filepath.Join(state, "nope"), "master"}, 1, "opening repository"},
	} {
		code, out, errs := buildMain(t, tt.args...)
		if code != tt.code || !strings.Contains(out+errs, tt.out) {
			t.Errorf("build %v: exit %d, output %q; want exit %d and %q", tt.args, code, out+errs, tt.code, tt.out)
		}
	}
	code, out, _ := buildMain(t, "--state", state, "--list")
	if code != 0 || !strings.Contains(out, "no cached builds") {
		t.Errorf("build --list on an empty cache: %d %q", code, out)
	}
}

// TestBuildCommand builds the fixture's base commit through the command
// line (a cache hit once any test has built it) and a documentation-only
// commit on top, which must say it shares its parent's build; then lists
// the cache.
func TestBuildCommand(t *testing.T) {
	pgsrctest.Require(t)
	state, err := pgsrctest.StateDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pg.git")
	base, err := pgsrc.NewRepo(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := pgsrc.Commit(dir, "docs only", pgsrc.BaseDate.Add(time.Hour), map[string]func(string) (string, error){
		"doc/src/sgml/ref/copy.sgml": func(old string) (string, error) { return old + "<!-- cli test -->\n", nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := buildMain(t, "--repo", dir, "--state", state, "master~1", doc[:12])
	if code != 0 {
		t.Fatalf("build exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	for _, want := range []string{base[:10] + " Import postgresql-15", doc[:10] + " docs only", "key:    " + base + "-",
		"prefix: " + filepath.Join(state, "builds", base), "shares the build of " + base[:10]} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "prefix: "); ok {
			if _, err := os.Stat(filepath.Join(p, "bin", "postgres")); err != nil {
				t.Errorf("no postgres binary in the install: %v", err)
			}
		}
	}
	code, out, _ = buildMain(t, "--state", state, "--list")
	if code != 0 || !strings.Contains(out, base[:10]) || !strings.Contains(out, "Import postgresql-15") {
		t.Errorf("build --list: %d\n%s", code, out)
	}
}

// TestOpenBuilderTimeout: the builder every command opens (build, run,
// compare, bisect, demo, the nightly pass and the daemon's jobs) carries
// the config's build timeout, so no build runs unbounded.
func TestOpenBuilderTimeout(t *testing.T) {
	dir := t.TempDir()
	if _, err := git.PlainInit(dir, true); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Repo: dir, StateDir: t.TempDir(), RunAs: proc.BenchUser, Build: config.Build{Timeout: 7 * time.Minute}}
	var out bytes.Buffer
	b, _, err := openBuilder(context.Background(), &Env{Stdout: &out, Stderr: &out}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b.Timeout != 7*time.Minute {
		t.Errorf("builder timeout %s, want the config's 7m", b.Timeout)
	}
}
