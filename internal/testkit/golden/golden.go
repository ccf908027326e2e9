// Package golden compares test output with files under a package's
// testdata directory, and rewrites them when the test binary runs with
// -update. Tests only: the pgbisect binary never links it.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// Check compares got with testdata/name, or writes got there under
// -update. A difference fails the test with the text it got, so the
// change can be read before it is accepted.
func Check(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test with -run '%s' -update to create it): %v", t.Name(), err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file; run with -update if the change is intended.\n--- got ---\n%s", path, got)
	}
}
