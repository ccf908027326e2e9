package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestCheckResumeLikeNew: a resumed bisection from a request is checked as
// a new one is: --client-bin (a local file run as run_as), an ID that is
// no bisection's, and inputs the results store holds are refused.
func TestCheckResumeLikeNew(t *testing.T) {
	sc := Scenarios{Dirs: []string{"../../configs/scenarios"}}
	for _, c := range []struct {
		r    BisectRequest
		want string
	}{
		{BisectRequest{Resume: "20260130T021500Z-copy-single-9f8377f7a2", ClientBin: "/tmp/x"}, "--client-bin names a directory"},
		{BisectRequest{Resume: "../../etc/passwd"}, "is not a bisection ID"},
		{BisectRequest{Resume: "abc\n@pgbisect cancel 1"}, "is not a bisection ID"},
		{BisectRequest{Resume: "abc", Scenario: "/etc/shadow"}, "give none of them"},
		{BisectRequest{Resume: "abc", Good: "/usr/lib/postgresql/15/bin"}, "give none of them"},
	} {
		if _, err := Check(c.r, sc); err == nil || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.r, err, c.want)
		}
	}
	r, err := Check(BisectRequest{Resume: "20260130T021500Z-copy-single-9f8377f7a2", MaxTime: time.Hour, Exhaustive: true}, sc)
	if err != nil || r.(BisectRequest).MaxTime != time.Hour {
		t.Errorf("a resume with its own flags: %+v, %v", r, err)
	}
}

// TestCheckRevisionSyntax: a request's revision is git syntax, never a
// path: ranges, a path's parts, bin directories, control characters,
// git's rev:path and an overlong one are refused; hashes, tags, branches
// with a remote and ~N/^N suffixes pass.
func TestCheckRevisionSyntax(t *testing.T) {
	sc := Scenarios{Dirs: []string{"../../configs/scenarios"}}
	for _, rev := range []string{
		"tmp/evil/bin", "usr/lib/postgresql/16/bin", "bin", "REL_15..REL_16", "a/../b", "a//b", "a/.x", "a/", "a.",
		"HEAD:src/include", "master@{1}", "a b", "a\tb", "a\x00b", "a\x1bb", "x.lock", "a*", "a\\b", strings.Repeat("a", 201),
		"héllo", "~0", "^HEAD", "+x", ".x", "-x",
	} {
		for _, r := range []Request{
			BisectRequest{Scenario: "copy-single", Good: rev, Bad: "REL_16_0"},
			CompareRequest{Scenario: "copy-single", A: "REL_16_0", B: rev},
		} {
			if _, err := Check(r, sc); err == nil || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "is not a revision") {
				t.Errorf("%q in a %s: %v", rev, r.Kind(), err)
			}
		}
	}
	for _, rev := range []string{"9f8377f7a2", "REL_16_0", "origin/REL_16_STABLE", "master~10", "v16^", "HEAD^2~3", "feature/x-y_z.2", "a+b", "@"} {
		if _, err := Check(CompareRequest{Scenario: "copy-single", A: "REL_16_0", B: rev}, sc); err != nil {
			t.Errorf("%q: %v", rev, err)
		}
	}
}
