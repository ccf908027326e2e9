package app

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
)

// guideRepo makes a git repository in PostgreSQL's style: each commit
// writes the files given, and the hashes are returned oldest first.
func guideRepo(t *testing.T, commits ...map[string]string) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "master")
	var hashes []string
	for i, files := range commits {
		for p, text := range files {
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, p), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		git("add", "-A")
		git("commit", "-q", "--allow-empty", "-m", "commit "+string(rune('a'+i)))
		hashes = append(hashes, git("rev-parse", "HEAD"))
	}
	return dir, hashes
}

const copyfromparse = `/* copyfromparse.c */
static bool CopyReadLine(CopyFromState cstate);

bool
NextCopyFrom(CopyFromState cstate, ExprContext *econtext,
			 Datum *values, bool *nulls)
{
	return CopyReadLine(cstate);
}

static bool
CopyReadLine(CopyFromState cstate)
{
	return true;
}
`

// TestGuidePointers: the functions of a profile are found where the bad
// commit's tree defines them (not where they are declared or called), and
// point at the commits of the range that touch those files; a function no
// changed file defines (a library's) points at nothing.
func TestGuidePointers(t *testing.T) {
	const cf, nu = "src/backend/commands/copyfromparse.c", "src/backend/utils/adt/numutils.c"
	dir, h := guideRepo(t,
		map[string]string{cf: copyfromparse, nu: "int32\npg_strtoint32(const char *s)\n{\n}\n", "src/include/copy.h": "extern bool NextCopyFrom(CopyFromState cstate);\n"},
		map[string]string{"doc/copy.sgml": "docs\n"},
		map[string]string{cf: copyfromparse + "/* more */\n"},
		map[string]string{nu: "/* header */\nint32\npg_strtoint32(const char *s)\n{\n}\n", "src/backend/x.c": "void\nf(void)\n{\n\tNextCopyFrom(c, e, v, n);\n}\n"},
		map[string]string{"src/include/copy.h": "extern bool NextCopyFrom(CopyFromState cstate); /* changed */\n"},
	)
	repo, err := build.Open(context.Background(), dir, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var commits []bisect.Commit
	for i, hash := range h {
		commits = append(commits, bisect.Commit{Hash: hash, Key: "k" + hash, NoCompile: i == 1})
	}
	commits[1].Key = commits[0].Key
	s, err := bisect.NewState(bisect.Inputs{Repo: dir, Good: h[0], Bad: h[4], Scenario: "s", Metric: "m"}, commits, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	funcs := guideFunctions(&finding.Profile{Self: []finding.FunctionShare{
		{Function: "NextCopyFrom", Change: 0.42}, {Function: "memcpy", Change: 0.05}, {Function: "[postgres]", Change: 0.04},
		{Function: "CopyReadLine.isra.0", Change: 0.03}, {Function: "pg_strtoint32", Change: 0.02}, {Function: "heap_insert", Change: 0.005},
	}})
	if got := names(funcs); !slices.Equal(got, []string{"NextCopyFrom", "memcpy", "CopyReadLine"}) {
		t.Fatalf("functions followed: %v", got)
	}
	ptrs, err := guidePointers(repo, s, funcs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		files   []string
		commits []int
	}{"NextCopyFrom": {[]string{cf}, []int{2}}, "memcpy": {nil, nil}, "CopyReadLine": {[]string{cf}, []int{2}}}
	for _, p := range ptrs {
		w := want[p.Function]
		if !slices.Equal(p.Files, w.files) || !slices.Equal(p.Commits, w.commits) {
			t.Errorf("%s: files %v, commits %v; want %v, %v", p.Function, p.Files, p.Commits, w.files, w.commits)
		}
	}
	ptrs, err = guidePointers(repo, s, []finding.FunctionShare{{Function: "pg_strtoint32", Change: 0.1}})
	if err != nil || len(ptrs) != 1 || !slices.Equal(ptrs[0].Commits, []int{3}) || !slices.Equal(ptrs[0].Files, []string{nu}) {
		t.Errorf("pg_strtoint32: %+v, %v; want numutils.c and commit 3", ptrs, err)
	}
	s.SetGuide(bisect.Guide{Pointers: ptrs}, time.Time{})
	if !slices.Equal(s.Hints, []int{3}) || !strings.Contains(s.GuideSummary(), "profile points at pg_strtoint32 ("+nu+", self share +10.0 points): 1 commit touches it") {
		t.Errorf("hints %v, summary %q", s.Hints, s.GuideSummary())
	}
}

func TestDefinedIn(t *testing.T) {
	src := []byte("static int foo(int);\nint\nfoo(int x)\n{\n\treturn bar(x);\n}\nbar(int y);\n")
	if got := definedIn(src, []string{"foo", "bar", "fo"}); !slices.Equal(got, []string{"foo"}) {
		t.Errorf("defined: %v, want foo only (bar is only declared, fo is a prefix)", got)
	}
}
