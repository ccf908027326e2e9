package main

import (
	"os/exec"
	"path"
	"slices"
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

// TestLibrariesDoNotImportTheCommandLayer fails when a library package
// (bisect, bench, build, notify, store and their subpackages,
// bisect/finding, and the application layer internal/app and
// internal/app/nightly, tests included) imports internal/front/config or
// internal/front/cli: data flows one way, from the CLI and the config that
// composes the components down to them. It also holds the library layer's
// own rules (docs/architecture.md): the bisection engine depends on
// bench/stats and its own types only, and notify (which renders findings)
// and store (which persists them) know the finding model, not each other.
func TestLibrariesDoNotImportTheCommandLayer(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to list the packages' imports: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-f", "{{.ImportPath}} {{join .Imports \",\"}} {{join .TestImports \",\"}},{{join .XTestImports \",\"}}",
		"../../bisect/...", "../../bench/...", "../../build/...", "../../notify/...", "../../store/...",
		"../../internal/app/...", "../../internal/base/...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list listed only %d library packages:\n%s", len(lines), out)
	}
	const mod = "github.com/pgbisect/pgbisect/"
	under := func(pkg, dir string) bool { return pkg == mod+dir || strings.HasPrefix(pkg, mod+dir+"/") }
	for _, line := range lines {
		f := strings.Split(line+"  ", " ")
		pkg, imports, testImports := f[0], f[1], f[2]
		for _, imp := range strings.Split(imports+","+testImports, ",") {
			if under(imp, "internal/front") {
				t.Errorf("%s imports %s: the front ends (cli, web, jobs, intake, config) sit above the application and the libraries; give it what it needs as its own types and let internal/front/config convert", pkg, imp)
			}
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			switch {
			case under(pkg, "internal/base") && !under(imp, "internal/base") && !under(imp, "internal/testkit"):
				t.Errorf("%s imports %s: the shared leaves in internal/base import only each other", pkg, imp)
			case !under(pkg, "internal/app") && under(imp, "internal/app"):
				t.Errorf("%s imports %s: the libraries sit below the application layer", pkg, imp)
			case pkg == mod+"bisect" && !under(imp, "bisect") && imp != mod+"bench/stats":
				t.Errorf("%s imports %s: the bisection engine depends on bench/stats and its own types only (findings are made from its State in bisect/finding)", pkg, imp)
			case pkg == mod+"bisect/finding" && !slices.Contains(findingMayImport, strings.TrimPrefix(imp, mod)) && !slices.Contains(strings.Split(testImports, ","), imp):
				t.Errorf("%s imports %s: a finding is made from the engine's State and bench's numbers only (%s)", pkg, imp, strings.Join(findingMayImport, ", "))
			// The finding's tests may render what they made.
			case (under(pkg, "notify") || pkg == mod+"bisect/finding") && under(imp, "store"),
				under(pkg, "store") && under(imp, "notify"),
				pkg == mod+"bisect/finding" && under(imp, "notify") && slices.Contains(strings.Split(imports, ","), imp):
				t.Errorf("%s imports %s: notify renders findings and store persists them; both know bisect/finding, not each other", pkg, imp)
			}
		}
	}
}

// findingMayImport are the packages of pgbisect bisect/finding imports
// (its tests may render what they make with notify): the engine's State,
// the statistics' verdicts and the profiles' comparison, which a finding
// carries as evidence.
var findingMayImport = []string{"bisect", "bench/stats", "bench/profile"}

// cliMayImport are the packages of pgbisect the command line imports
// (tests apart). It translates flags into the application's typed
// requests, starts the other front ends, and prints what the application
// returns; the work itself (building, measuring, bisecting, posting) is
// internal/app's, reached through its operations.
var cliMayImport = []string{
	// The operations, their requests, events and results.
	"internal/app", "internal/app/nightly",
	// The config file, and the front ends 'pgbisect daemon' and 'serve'
	// start.
	"internal/front/config", "internal/front/jobs", "internal/front/web", "internal/front/intake",
	// The types of the results it prints: a bisection's state, a finding,
	// verdicts, profiles, report file names, short hashes.
	"bisect", "bisect/finding", "bench/stats", "bench/profile", "notify", "build",
	// What 'pgbisect status', 'results' and 'db' read, and the store
	// 'serve' opens.
	"store",
	// Leaves: the closest name of a typo, psql's environment, who holds
	// the machine, the demo's repository.
	"internal/base/strictyaml", "internal/base/proc", "internal/base/machinelock", "internal/base/pgsrc",
}

// TestFrontEnds holds the front ends' rules (docs/architecture.md): the
// command line imports only cliMayImport; no package but cmd/pgbisect
// imports the command line; web, jobs and intake never import the
// command line or the config (they take their options as their own
// types); the config composes the components' types and imports no
// application or front end.
func TestFrontEnds(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to list the packages' imports: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-f", "{{.ImportPath}} {{join .Imports \",\"}}", "../../...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/pgbisect/pgbisect/"
	under := func(pkg, dir string) bool { return pkg == mod+dir || strings.HasPrefix(pkg, mod+dir+"/") }
	fronts := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if under(pkg, "internal/front") {
			fronts++
		}
		for _, imp := range strings.Split(imports, ",") {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			switch {
			case pkg == mod+"internal/front/cli" && !slices.Contains(cliMayImport, strings.TrimPrefix(imp, mod)):
				t.Errorf("%s imports %s: the command line translates flags into internal/app's typed requests and prints what it returns; move the work into internal/app (or, for a type it prints, add it to cliMayImport with why)", pkg, imp)
			case imp == mod+"internal/front/cli" && pkg != mod+"cmd/pgbisect":
				t.Errorf("%s imports %s: only the binary's main starts the command line", pkg, imp)
			case (under(pkg, "internal/front/web") || under(pkg, "internal/front/jobs") || under(pkg, "internal/front/intake")) && under(imp, "internal/front/config"):
				t.Errorf("%s imports %s: a front end takes its options as its own types; the command line reads the config", pkg, imp)
			case under(pkg, "internal/front/config") && (under(imp, "internal/app") || under(imp, "internal/front")):
				t.Errorf("%s imports %s: the config composes the components' own config types and knows nothing above them", pkg, imp)
			}
		}
	}
	if fronts < 5 {
		t.Fatalf("go list listed %d front-end packages, want cli, web, jobs, intake and config:\n%s", fronts, out)
	}
}
