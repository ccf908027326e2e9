package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestDBImport imports a state directory as an older pgbisect left it (the
// store's testdata: a bisection, two findings, a post) with "pgbisect db
// import", then again, which imports nothing; the bisection is then listed
// by status, resumable from the store.
func TestDBImport(t *testing.T) {
	st := storetest.Store(t)
	// The package's tests share the store: the imported finding with an
	// issue left to post must not be posted by the post command's tests.
	t.Cleanup(func() {
		for _, id := range []string{"20260130T021500Z-copy-single-9f8377f7a2", "20260131T021500Z-copy-single-3333333333"} {
			st.SettleFinding(context.Background(), id)
		}
	})
	old := t.TempDir()
	if err := os.CopyFS(old, os.DirFS("../../../store/testdata/oldstate")); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	code, out, errs := postMain(t, "db", "import", "--state", state, "--state-dir", old)
	if code != 0 || !strings.Contains(out, "imported 1 bisections, 2 findings and 1 posts from "+old) {
		t.Fatalf("db import: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = postMain(t, "db", "import", "--state", state, "--state-dir", old)
	if code != 0 || !strings.Contains(out, "imported 0 bisections, 0 findings and 0 posts") || !strings.Contains(out, "3 were there already") {
		t.Fatalf("db import again: exit %d\n%s%s", code, out, errs)
	}
	if _, err := st.LoadBisection(context.Background(), "eb90e44cce47"); err != nil {
		t.Fatalf("the imported bisection does not load: %v", err)
	}
	code, out, errs = postMain(t, "status", "--state", state)
	if code != 0 || !strings.Contains(out, "eb90e44cce47") {
		t.Errorf("status does not list the imported bisection: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = postMain(t, "db", "import", "--state", state, "--state-dir", filepath.Join(old, "findings", "x.json"), "extra")
	if code != 2 || !strings.Contains(errs, "takes no arguments") {
		t.Errorf("db import with an argument: exit %d\n%s", code, errs)
	}
}
