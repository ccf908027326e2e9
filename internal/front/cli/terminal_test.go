package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/app"
)

// terminalEvents are a bisection's events as the App emits them, in a
// typical order.
func terminalEvents() []app.Event {
	at := time.Date(2026, 12, 1, 15, 4, 5, 0, time.UTC)
	long := "[search] sample 1a2b3c4d5e vs 9f8e7d6c5b (3 of 10 samples): copyfrom.c: something; 2 verdicts (1 regressions), 12 candidate commits left, 3 builds, 21 samples, 4m0s elapsed, about 5m0s–9m0s left"
	return []app.Event{
		{Kind: app.KindNote, At: at, Text: "computing the build keys of 30 commits"},
		{Kind: app.KindStart, At: at, Bisection: "b-1", Text: "bisection b-1: 30 commits, 20 can be culprits (resume with: pgbisect bisect --resume b-1)"},
		{Kind: app.KindStatus, At: at, Bisection: "b-1", Text: "[endpoints] build 1a2b3c4d5e: first", Short: "[endpoints] 20 candidates left · 0 builds · 0 samples · 0s elapsed, 40–80 samples left · build 1a2b3c4d5e"},
		{Kind: app.KindBuildStep, At: at, Text: "build 1a2b3c4d5e: make (10s, total 12s)"},
		{Kind: app.KindBuildFinished, At: at, Commit: "1a2b3c4d5e"},
		{Kind: app.KindStatus, At: at, Bisection: "b-1", Text: long, Short: "[search] 12 candidates left · 3 builds · 21 samples · 4m0s elapsed, 5m0s–9m0s left · sample 1a2b3c4d5e vs 9f8e7d6c5b 3/10"},
		{Kind: app.KindSample, At: at, Bisection: "b-1", Commit: "1a2b3c4d5e", Value: 1.5},
		{Kind: app.KindVerdict, At: at, Bisection: "b-1", Text: "1a2b3c4d5e vs 9f8e7d6c5b: regression +25%"},
		{Kind: app.KindNote, At: at, Text: "profiled 1a2b3c4d5e run 2/5: 73 CPU samples"},
		{Kind: app.KindNote, At: at, Text: "revert check 1: 1a2b3c4d5e sample 3 of up to 15"},
		{Kind: app.KindCulprit, At: at, Bisection: "b-1", Text: "culprit: 1a2b3c4d5e copyfrom.c: something"},
		{Kind: app.KindDone, At: at, Bisection: "b-1", Finding: "f-1"},
	}
}

// TestBisectProgressOnATerminal: on a terminal a bisection shows one status
// line updated in place and the decisions and notes as lines; the status,
// build and sample lines go to the log file, whose path is printed.
func TestBisectProgressOnATerminal(t *testing.T) {
	var out bytes.Buffer
	logs := filepath.Join(t.TempDir(), "logs")
	p := newBisectProgress(terminal{w: &out, tty: true, width: 200}, false, logs)
	sink := p.sink()
	logger := p.logger()
	for i, e := range terminalEvents() {
		sink(e)
		if i == 2 {
			logger.Info("building", "commit", "1a2b3c4d5e")
			logger.Warn("machine is busy; results will be noisy", "load1", 25.04)
		}
	}
	p.close()
	logger.Warn("after the end")
	got := out.String()
	t.Logf("terminal:\n%q", got)
	logPath := filepath.Join(logs, "bisect-b-1.log")
	// What a person sees once every \r has moved the cursor back (log
	// records without their time).
	var lines []string
	for _, l := range strings.Split(got, "\n") {
		if i := strings.LastIndex(l, "\r\033[K"); i >= 0 {
			l = l[i+len("\r\033[K"):]
		}
		if strings.HasPrefix(l, "time=") {
			_, l, _ = strings.Cut(l, " ")
		}
		if l != "" {
			lines = append(lines, l)
		}
	}
	want := []string{
		"computing the build keys of 30 commits",
		"every build and sample line goes to " + logPath + " (--verbose shows them here)",
		"bisection b-1: 30 commits, 20 can be culprits (resume with: pgbisect bisect --resume b-1)",
		"level=WARN msg=\"machine is busy; results will be noisy\" load1=25.04",
		"==> 1a2b3c4d5e vs 9f8e7d6c5b: regression +25%",
		"==> culprit: 1a2b3c4d5e copyfrom.c: something",
		"level=WARN msg=\"after the end\"",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines on the terminal:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range []string{
		"\r\033[K[endpoints] 20 candidates left · 0 builds · 0 samples · 0s elapsed, 40–80 samples left · build 1a2b3c4d5e — build 1a2b3c4d5e: make (10s, total 12s)",
		"\r\033[K[search] 12 candidates left · 3 builds · 21 samples · 4m0s elapsed, 5m0s–9m0s left · sample 1a2b3c4d5e vs 9f8e7d6c5b 3/10\r\033[K==> 1a2b3c4d5e vs",
		"\r\033[K[search] 12 candidates left · 3 builds · 21 samples · 4m0s elapsed, 5m0s–9m0s left · sample 1a2b3c4d5e vs 9f8e7d6c5b 3/10 — revert check 1: 1a2b3c4d5e sample 3 of up to 15",
	} {
		if !strings.Contains(got, s) {
			t.Errorf("the terminal does not show %q", s)
		}
	}
	if strings.Contains(got, "(3 of 10 samples)") || strings.Contains(got, "make (10s, total 12s)\n") || strings.Contains(got, "of up to 15\n") ||
		strings.Contains(got, "CPU samples\n") {
		t.Error("a per-sample or build line was printed as a line")
	}
	if !strings.HasSuffix(got, " level=WARN msg=\"after the end\"\n") {
		t.Error("the status line is left on the screen at the end, or drawn again after it")
	}

	// A narrow terminal: the status line is cut to fit.
	out.Reset()
	p = newBisectProgress(terminal{w: &out, tty: true, width: 40}, false, logs)
	p.sink()(terminalEvents()[5])
	if want := "\r\033[K[search] 12 candidates left · 3 builds…"; !strings.HasSuffix(out.String(), "\n"+want) {
		t.Errorf("on 40 columns: %q, want %q", out.String(), want)
	}
	p.close()
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"15:04:05 computing the build keys", "15:04:05 [search] sample 1a2b3c4d5e vs 9f8e7d6c5b (3 of 10 samples)",
		"15:04:05 build 1a2b3c4d5e: make (10s, total 12s)", "15:04:05 revert check 1: 1a2b3c4d5e sample 3 of up to 15",
		"15:04:05 ==> culprit: 1a2b3c4d5e", "level=INFO msg=building commit=1a2b3c4d5e"} {
		if !strings.Contains(string(log), s+"") {
			t.Errorf("log file without %q:\n%s", s, log)
		}
	}
}

// TestBisectProgressLineByLine: not on a terminal, or with --verbose, every
// line is printed as it comes, as before, and no log file is written.
func TestBisectProgressLineByLine(t *testing.T) {
	var want bytes.Buffer
	plain := progress(&want)
	for _, e := range terminalEvents() {
		plain(e)
	}
	for _, tc := range []struct {
		name         string
		tty, verbose bool
	}{{"pipe", false, false}, {"terminal --verbose", true, true}} {
		var out bytes.Buffer
		logs := filepath.Join(t.TempDir(), "logs")
		p := newBisectProgress(terminal{w: &out, tty: tc.tty, width: 80}, tc.verbose, logs)
		sink := p.sink()
		for _, e := range terminalEvents() {
			sink(e)
		}
		p.close()
		if out.String() != want.String() || strings.Contains(out.String(), "\r") {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, out.String(), want.String())
		}
		if _, err := os.Stat(logs); err == nil {
			t.Errorf("%s: a log file was written", tc.name)
		}
	}
	if !strings.Contains(want.String(), "(3 of 10 samples)") {
		t.Error("the status lines are missing from the line-by-line output")
	}
}

// TestTerminalOf: a pipe is not a terminal.
func TestTerminalOf(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if terminalOf(w).tty || terminalOf(&bytes.Buffer{}).tty {
		t.Error("a pipe or a buffer taken for a terminal")
	}
}
