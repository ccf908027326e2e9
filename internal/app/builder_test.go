package app

import (
	"context"
	"testing"

	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/testkit/gittest"
)

// TestBuilderBuildsAsRunAs: as root, the App's builder runs the commits'
// configure and make as run_as (the servers' user), never as root and
// never as db_run_as.
func TestBuilderBuildsAsRunAs(t *testing.T) {
	repo, _, _, _, _ := gittest.Repo(t)
	a, err := Open(context.Background(), Options{StateDir: t.TempDir(), Repo: repo, Branch: "master", RunAs: "postgres", DBRunAs: "pgbisect"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := a.Builder(context.Background(), func(Event) {})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !proc.IsRoot() && b.BuildAs != nil:
		t.Errorf("not root, yet builds run as %s", b.BuildAs.Name)
	case proc.IsRoot() && (b.BuildAs == nil || b.BuildAs.Name != "postgres"):
		t.Errorf("as root, builds run as %+v, want run_as (postgres)", b.BuildAs)
	}
	a2, err := Open(context.Background(), Options{StateDir: t.TempDir(), Repo: repo, Branch: "master", RunAs: "no-such-user-pgbisect"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a2.Builder(context.Background(), func(Event) {}); proc.IsRoot() && err == nil {
		t.Error("a run_as that does not exist was accepted for builds")
	}
}
