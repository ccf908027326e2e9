package main

import (
	"os/exec"
	"path"
	"strings"
	"testing"
)

// TestBinaryLinksNoTestCode fails when the pgbisect binary links package
// testing or a test-support package (storetest, pgsrctest, ...): test
// helpers belong in packages that only tests import. It asks the go tool,
// which "go test" puts first on PATH, for the binary's dependencies.
func TestBinaryLinksNoTestCode(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to list the binary's dependencies: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{join .Imports \",\"}}", ".").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	importers := map[string][]string{}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 3 {
			for _, imp := range strings.Split(f[2], ",") {
				importers[imp] = append(importers[imp], f[0])
			}
		}
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("unexpected go list line %q", line)
		}
		pkg, std := f[0], f[1] == "true"
		if pkg == "testing" || strings.HasPrefix(pkg, "testing/") || !std && strings.HasSuffix(path.Base(pkg), "test") {
			t.Errorf("the binary links %s, imported by %s: move what needs it into a package only tests import",
				pkg, strings.Join(importers[pkg], ", "))
		}
	}
	if n := len(lines); n < 50 {
		t.Fatalf("go list -deps listed only %d packages, not the binary's dependencies:\n%s", n, out)
	}
}
