package proc

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

func TestEnvAllowlist(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "ghp_proctestTOKEN")
	t.Setenv("PGBISECT_DB", "postgres://u:pw@h/db")
	t.Setenv("PGPASSWORD", "pw")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "k")
	t.Setenv("PGBISECT_WEB_TOKEN", "web-token")
	t.Setenv("PGBISECT_WEBHOOK_SECRET", "hook-secret")
	t.Setenv("CCACHE_DIR", "/var/cache/ccache")
	t.Setenv("CFLAGS", "-O2")
	t.Setenv("LC_MESSAGES", "C")
	env := strings.Join(Env("EXTRA=1"), "\n") + "\n"
	for _, bad := range []string{"GITHUB_TOKEN=", "PGBISECT_DB=", "PGPASSWORD=", "AWS_SECRET_ACCESS_KEY=", "PGBISECT_WEB_TOKEN=", "PGBISECT_WEBHOOK_SECRET="} {
		if strings.Contains(env, bad) {
			t.Errorf("Env() passes %s", bad)
		}
	}
	for _, good := range []string{"CCACHE_DIR=/var/cache/ccache\n", "CFLAGS=-O2\n", "LC_MESSAGES=C\n", "EXTRA=1\n"} {
		if !strings.Contains(env, good) {
			t.Errorf("Env() lacks %s", strings.TrimSpace(good))
		}
	}
}

// TestChildEnvironAndGroups reads a real child's /proc/self/environ and,
// as root, the groups of a child run as postgres: the token is not there,
// and neither is any of root's groups.
func TestChildEnvironAndGroups(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "ghp_proctestTOKEN")
	ctx := context.Background()
	out, err := Command(ctx, nil, "cat", "/proc/self/environ").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "ghp_proctestTOKEN") {
		t.Error("a child's /proc/self/environ holds the GitHub token")
	}
	citest.Root(t, "a child run as another user gets that user's groups, not root's")
	u, err := LookupUser(BenchUser)
	if err != nil {
		citest.Unavailable(t, "%v (scripts/setup-debian.sh installs postgresql, which creates it)", err)
	}
	// Give pgbisect (root) supplementary groups of its own, as a login
	// shell would, so that keeping them would show.
	saved, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setgroups([]int{0, 4, 27}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setgroups(saved) })
	out, err = Command(ctx, u, "grep", "^Groups:", "/proc/self/status").Output()
	if err != nil {
		t.Fatal(err)
	}
	groups := strings.Fields(strings.TrimPrefix(strings.TrimSpace(string(out)), "Groups:"))
	want := map[string]bool{}
	for _, g := range u.Groups {
		want[strconv.FormatUint(uint64(g), 10)] = true
	}
	for _, g := range groups {
		if !want[g] {
			t.Errorf("a child run as postgres is in group %s (its groups: %v): root's groups were kept", g, u.Groups)
		}
	}
	rootGroups, _ := os.Getgroups()
	t.Logf("root's groups %v; the child's %v", rootGroups, groups)
}

func TestTail(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 5, "a\nb\nc"},
		{"", 3, ""},
		{"x\n\n", 1, "x"},
	} {
		if got := Tail(tt.in, tt.n); got != tt.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
