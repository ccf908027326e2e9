package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// rootEntries are the only names the repository's top folder may hold.
// Scratch output (perf's ctl/ack fifos and its error text, once run by
// hand at the root and then committed with a merge) is caught here before
// it is committed: add a name only for a real part of the project.
var rootEntries = map[string]bool{
	".ci": true, ".gitignore": true, "README.md": true, "go.mod": true, "go.sum": true,
	"bench": true, "bisect": true, "build": true, "cmd": true, "configs": true,
	"docs": true, "internal": true, "notify": true, "scripts": true, "store": true,
}

// TestRepositoryRootHoldsOnlyTheProject fails when the repository's top
// folder holds a file or folder that is not on the list: tracked or not,
// unless .gitignore ignores it (the built binary, a local run folder).
func TestRepositoryRootHoldsOnlyTheProject(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	names, err := rootNames(root)
	if err != nil {
		t.Fatal(err)
	}
	if !names["go.mod"] || !names["cmd"] {
		t.Fatalf("%s is not the repository root (no go.mod or cmd): %v", root, names)
	}
	var stray []string
	for n := range names {
		if !rootEntries[n] {
			stray = append(stray, n)
		}
	}
	sort.Strings(stray)
	if len(stray) > 0 {
		t.Errorf("the repository root holds %s: remove them (scratch output belongs in a temporary folder), "+
			"or add a real part of the project to rootEntries in %s", strings.Join(stray, ", "), "cmd/pgbisect/root_test.go")
	}
}

// rootNames lists the root's entries: in a git checkout the tracked ones
// and the untracked ones git does not ignore, elsewhere every entry.
func rootNames(root string) (map[string]bool, error) {
	names := map[string]bool{}
	if git, err := exec.LookPath("git"); err == nil {
		cmd := exec.Command(git, "ls-files", "--cached", "--others", "--exclude-standard", "--directory", "-z")
		cmd.Dir = root
		if out, err := cmd.Output(); err == nil {
			for _, p := range strings.Split(string(out), "\x00") {
				if p != "" {
					names[strings.SplitN(p, "/", 2)[0]] = true
				}
			}
			return names, nil
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name() != ".git" {
			names[e.Name()] = true
		}
	}
	return names, nil
}
