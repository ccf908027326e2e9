package app

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pgbisect/pgbisect/internal/base/strictyaml"
)

// Scenarios are the scenarios a request from someone else may name: the
// .yaml files of the configured scenario directories, by name
// ("copy-single" for copy-single.yaml; the first directory holding a name
// wins).
//
// The design choice: requests queued for a daemon (the web form, POST
// /api/requests, GitHub comments, 'pgbisect request') carry a scenario's
// name, never a path, and the daemon finds the file in its own
// directories. A path would let whoever may queue work make pgbisect, as
// root, read any file on the machine, and quote it back in an error.
type Scenarios struct {
	Dirs []string
}

// Names lists the scenario names, sorted.
func (s Scenarios) Names() []string {
	var names []string
	for _, d := range s.Dirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && !e.IsDir() && IsScenarioName(n) && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return names
}

// IsScenarioName reports whether s is a scenario's name rather than a
// path: no directory, no extension, no leading dot.
func IsScenarioName(s string) bool {
	return s != "" && !strings.ContainsAny(s, `/\`) && !strings.HasPrefix(s, ".") &&
		!strings.HasSuffix(s, ".yaml") && !strings.HasSuffix(s, ".yml")
}

// Name checks that s names one of the scenarios and returns the name (a
// trailing ".yaml" dropped). Anything else, a path above all, is a
// *CheckError naming the scenarios there are.
func (s Scenarios) Name(given string) (string, error) {
	name := strings.TrimSuffix(given, ".yaml")
	names := s.Names()
	if IsScenarioName(name) && slices.Contains(names, name) {
		return name, nil
	}
	what := fmt.Sprintf("unknown scenario %q", given)
	if !IsScenarioName(name) {
		what = fmt.Sprintf("scenario %q: give the name of one of the bot's scenarios, not a path", given)
	} else if c := strictyaml.Closest(name, names); c != "" {
		what += fmt.Sprintf(" (did you mean %s?)", c)
	}
	if len(names) == 0 {
		return "", &CheckError{"scenario", fmt.Errorf("%s: the bot has no scenarios (no .yaml file in %s)", what, strings.Join(s.Dirs, ", "))}
	}
	return "", &CheckError{"scenario", fmt.Errorf("%s: the bot has %s", what, strings.Join(names, ", "))}
}

// Path is the file of a scenario name.
func (s Scenarios) Path(name string) (string, error) {
	if _, err := s.Name(name); err != nil {
		return "", err
	}
	name = strings.TrimSuffix(name, ".yaml")
	for _, d := range s.Dirs {
		p := filepath.Join(d, name+".yaml")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return filepath.Abs(p)
		}
	}
	return "", &CheckError{"scenario", fmt.Errorf("unknown scenario %q", name)}
}

// scenarioFile is the file of a request's scenario: a name (a queued
// request's) is looked up in the App's scenario directories; a path (the
// command line's, or a job an older pgbisect queued) is taken as it is.
func (a *App) scenarioFile(s string) (string, error) {
	if !IsScenarioName(s) {
		return s, nil
	}
	return a.opts.Scenarios.Path(s)
}
