package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckNamesOnly: a request queued for someone else names a scenario
// of the directory; a path, even of a real scenario or of a file with a
// secret line, is refused before any file is opened, naming the scenarios
// there are; so are paths on the daemon's machine in the other fields.
func TestCheckNamesOnly(t *testing.T) {
	sc := Scenarios{Dirs: []string{"../../configs/scenarios"}}
	secret := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(secret, []byte("root:SECRET-LINE:19000::::::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{secret, "/var/lib/pgbisect/db/passfile", "../../configs/scenarios/copy-single.yaml", "..", ".hidden", "copy-single/..", `a\b`} {
		_, err := Check(BisectRequest{Scenario: s, Good: "A", Bad: "B"}, sc)
		var ce *CheckError
		if !errors.As(err, &ce) || ce.Field != "scenario" || !errors.Is(err, ErrBadRequest) || strings.Contains(err.Error(), "SECRET") ||
			!strings.Contains(err.Error(), "not a path: the bot has ") || !strings.Contains(err.Error(), "copy-single") {
			t.Errorf("scenario %q: %v", s, err)
		}
	}
	if _, err := Check(BisectRequest{Scenario: "copy-singel", Good: "A", Bad: "B"}, sc); err == nil || !strings.Contains(err.Error(), "did you mean copy-single?") {
		t.Errorf("a typo: %v", err)
	}
	r, err := Check(BisectRequest{Scenario: "copy-single.yaml", Good: "A", Bad: "B", Set: map[string]string{"rows": "1000"}}, sc)
	if b, ok := r.(BisectRequest); err != nil || !ok || b.Scenario != "copy-single" {
		t.Errorf("a name: %+v, %v", r, err)
	}
	for _, c := range []struct {
		r    Request
		want string
	}{
		{BisectRequest{Scenario: "copy-single", Good: "A", Bad: "B", ClientBin: "/tmp"}, "--client-bin names a directory"},
		{BisectRequest{Scenario: "copy-single", Good: "/usr/lib/postgresql/15/bin", Bad: "B"}, "is not a revision"},
		{BisectRequest{Scenario: "copy-single", Good: "A", Bad: "B", Set: map[string]string{"rows": "1; DROP TABLE x"}}, "rows is an integer"},
		{CompareRequest{Scenario: "copy-single", A: "A", Patches: []string{"/etc/shadow"}}, "patch files are paths"},
		{CompareRequest{Scenario: "copy-single", A: "A", B: "B", Profile: true, ProfileRuns: 1, FlameGraph: "/etc/x.svg"}, "--flamegraph names a file"},
		{CompareRequest{Scenario: "copy-single", A: "../bin", B: "B"}, "is not a revision"},
		{RunRequest{Scenario: "copy-single"}, "not checked before it is queued"},
	} {
		if _, err := Check(c.r, sc); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.r, err, c.want)
		}
	}
}
