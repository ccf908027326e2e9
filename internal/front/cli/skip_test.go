package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"
	"github.com/pgbisect/pgbisect/notify"
	"github.com/pgbisect/pgbisect/store/storetest"
)

const (
	crashAnchor = "\tChangeToDataDir();\n"
	crashPanic  = "\n\t/* pgbisect test: the server cannot start. */\n\telog(PANIC, \"pgbisect test: crash at start\");\n"
)

// TestBisectSkipsCrashingCommit bisects, for real, a two-commit history on
// PostgreSQL 15: a commit whose postmaster PANICs at start (it builds, and
// initdb works, but no server starts), then the injected COPY regression of
// the demo, which also removes the PANIC. The crashing commit is the
// search's first midpoint: it must be skipped, never blamed, with its
// server log in the report, and the culprit next to it becomes a range of
// the two.
func TestBisectSkipsCrashingCommit(t *testing.T) {
	state := pgsrctest.EndToEnd(t)
	ctx := context.Background()
	work := t.TempDir()
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(work, "crash.git")
	base, err := pgsrc.NewRepo(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	const postmaster = "src/backend/postmaster/postmaster.c"
	crash, err := pgsrc.Commit(repo, "postmaster.c: PANIC at start (pgbisect test: cannot be measured)", pgsrc.BaseDate.Add(time.Hour),
		map[string]func(string) (string, error){postmaster: func(old string) (string, error) {
			if !strings.Contains(old, crashAnchor) {
				t.Fatalf("%s: ChangeToDataDir() not found", postmaster)
			}
			return strings.Replace(old, crashAnchor, crashAnchor+crashPanic, 1), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	regress := demoStep{"copy-regression", "src/backend/commands/copyfromparse.c", ""}
	culprit, err := pgsrc.Commit(repo, "INJECTED REGRESSION (pgbisect test): extra per-row work in NextCopyFrom; the server starts again", pgsrc.BaseDate.Add(2*time.Hour),
		map[string]func(string) (string, error){
			regress.path: regress.edit(1),
			postmaster:   func(old string) (string, error) { return strings.Replace(old, crashPanic, "", 1), nil },
		})
	if err != nil {
		t.Fatal(err)
	}

	// First with a time bound a sample outlasts: it stops at the bound
	// with a partial answer, and the same command with a longer bound
	// (below) continues it to the end.
	args := []string{"bisect", "--state", state, "--repo", repo, "-s", "../../../configs/scenarios/copy-single.yaml",
		"--good", base, "--bad", culprit, "--set", "rows=100000", "--metric", "copy_time", "--min-effect", "0.10", "--max-samples", "20"}
	var stdout, stderr bytes.Buffer
	// Stopped at the bound, the answer is not in: exit 4, inconclusive
	// (docs/cli.md).
	if code := Main(ctx, append(args, "--max-time", "1s"), &stdout, &stderr); code != exitInconclusive {
		t.Fatalf("pgbisect bisect --max-time 1s exited %d, want %d (inconclusive):\n%s", code, exitInconclusive, proctest.LastLines(stderr.String(), 60))
	}
	for _, want := range []string{"budget: up to 20 samples per side per comparison, 40 per check; estimated ", "time bound 1s"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, proctest.LastLines(stderr.String(), 30))
		}
	}
	for _, want := range []string{": time-bound\nstopped at the time bound of 1s", "verdicts made before the time bound", "--max-time 2s"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	stdout.Reset()
	stderr.Reset()
	code := Main(ctx, append(args, "--max-time", "1h", "--json"), &stdout, &stderr)
	if !strings.Contains(stderr.String(), "had stopped at its time bound; continuing with --max-time 1h0m0s") {
		t.Errorf("the second run does not say it continues the stopped bisection:\n%s", proctest.LastLines(stderr.String(), 30))
	}
	if code != 0 {
		t.Fatalf("pgbisect bisect exited %d:\n%s", code, proctest.LastLines(stderr.String(), 60))
	}
	f, err := finding.Unmarshal(stdout.Bytes())
	if err != nil {
		t.Fatalf("output is not a finding: %v\n%s", err, proctest.LastLines(stdout.String(), 20))
	}
	if f.Kind != finding.Regression || len(f.Culprits) != 1 {
		t.Fatalf("finding %s with %d culprits, want one regression; warnings: %v\n%s", f.Kind, len(f.Culprits), f.Warnings, proctest.LastLines(stderr.String(), 40))
	}
	c := f.Culprits[0]
	if len(c.Range) != 2 || c.Range[0].Hash != crash || c.Range[1].Hash != culprit {
		t.Errorf("culprit %s, range %v: want the range of the crashing commit %s and the regression %s", c.Commit.ShortHash(), c.Range, short(crash), short(culprit))
	}
	var step *finding.Step
	for i := range f.Log {
		if f.Log[i].Commit.Hash == crash {
			step = &f.Log[i]
		}
	}
	if step == nil || step.Verdict != finding.StepUnmeasurable || !strings.Contains(step.ServerLog, "PANIC:  pgbisect test: crash at start") ||
		!strings.Contains(step.Note, "crashed") {
		t.Fatalf("log step of the crashing commit: %+v", step)
	}
	if md := notify.MarkdownFile(f); !strings.Contains(md, "Server logs of commits that could not be measured") || !strings.Contains(md, "cannot be measured, so the range") {
		t.Errorf("the report lacks the server log or the reason for the range:\n%s", md)
	}

	// The skip is in the saved state: a resumed bisection would not try
	// the commit again.
	st, err := storetest.Store(t).LoadBisection(ctx, f.ID[strings.LastIndexByte(f.ID, '-')+1:])
	if err != nil {
		t.Fatal(err)
	}
	for i, sc := range st.Commits {
		if sc.Hash == crash {
			b := st.Builds[sc.Key]
			if b == nil || !b.Unmeasurable || b.Broken {
				t.Errorf("build record of the crashing commit %+v: want it unmeasurable", b)
			}
			if len(st.Samples[sc.Key]) != 0 {
				t.Errorf("samples recorded for the crashing commit %d: %v", i, st.Samples[sc.Key])
			}
		}
	}
	t.Logf("bisection: %d builds (%s), %d samples (%s)", st.BuildsDone, st.BuildTime.Round(time.Second), st.SamplesTaken, st.MeasureTime.Round(time.Second))
}
