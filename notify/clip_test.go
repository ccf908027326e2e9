package notify

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// hugeLog returns the two-culprit finding with a bisection log of n steps.
func hugeLog(n int) *finding.Finding {
	f := twoCulprits()
	for i := 0; i < n; i++ {
		c := commit(fmt.Sprintf("%040x", 0xdead0000+i), fmt.Sprintf("Commit number %d with a long enough subject to take room", i), "A. Hacker <a@example.org>", 1)
		f.Log = append(f.Log, step(c, 100+i, finding.StepBad, 17.3, 10, i))
	}
	f.Log[len(f.Log)-1].Commit.Subject = "The very last step"
	return f
}

// TestClipLog checks that a body with a huge log is clipped below GitHub's
// limit by clipping the log, keeping the verdict, the tables, the first and
// last steps and everything after the log.
func TestClipLog(t *testing.T) {
	f := hugeLog(5000)
	full := Markdown(f, Options{})
	if len(full) < 2*MaxBody {
		t.Fatalf("test body is only %d bytes; make the log bigger", len(full))
	}
	for _, tc := range []struct {
		name string
		body string
	}{
		{"markdown", Markdown(f, Options{MaxLen: MaxBody, Marker: "<!-- pgbisect finding=x -->"})},
		{"text", Text(f, Options{MaxLen: MaxBody})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if n := utf8.RuneCountInString(body); n >= 65536 || len(body) > MaxBody {
				t.Fatalf("clipped body has %d characters, %d bytes; want at most %d bytes", n, len(body), MaxBody)
			}
			if len(body) < MaxBody-2000 {
				t.Errorf("clipped body has %d bytes: more of the log would have fit under %d", len(body), MaxBody)
			}
			for _, want := range []string{
				"Regression:", "elapsed ↓", "+10.1%", // verdict and tables
				"Fix typo in comment",            // the first step
				"The very last step",             // the last step
				"steps cut",                      // the gap row
				"The bisection log was clipped",  // the note
				"of its 5008 steps are shown",    //
				"pgbisect bisect -s copy-single", // the reproduce command after the log
				"took 2h13m",                     // the footer
			} {
				if !strings.Contains(body, want) {
					t.Errorf("clipped body lacks %q", want)
				}
			}
			if strings.Contains(body, "Commit number 2500 ") {
				t.Errorf("the middle of the log was kept")
			}
		})
	}
}

// TestClipTail checks the last resort: when even without its log the body
// is too long, the tail is cut at a line boundary, an open code block is
// closed, and a note says so.
func TestClipTail(t *testing.T) {
	f := hugeLog(10)
	for i := 0; i < 3000; i++ {
		f.Warnings = append(f.Warnings, fmt.Sprintf("warning %d: the server log said something long and repetitive about checkpoints", i))
	}
	body := Markdown(f, Options{MaxLen: MaxBody})
	if len(body) > MaxBody {
		t.Fatalf("clipped body has %d bytes, want at most %d", len(body), MaxBody)
	}
	if !strings.Contains(body, "Regression:") || !strings.Contains(body, "| elapsed ↓") {
		t.Errorf("verdict or tables were cut")
	}
	if !strings.Contains(body, "everything after this point was cut") {
		t.Errorf("no note saying the tail was cut")
	}
	if strings.Count(body, "```")%2 != 0 {
		t.Errorf("unbalanced code fences")
	}
	if !utf8.ValidString(body) {
		t.Errorf("clipped body is not valid UTF-8")
	}
}

// TestNoClipWhenShort checks a short body is left alone.
func TestNoClipWhenShort(t *testing.T) {
	f := twoCulprits()
	if a, b := Markdown(f, Options{}), Markdown(f, Options{MaxLen: MaxBody}); a != b {
		t.Errorf("a short body was changed by clipping")
	}
}
