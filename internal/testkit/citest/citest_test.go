package citest

import (
	"fmt"
	"strings"
	"testing"
)

// ending records how a test was ended instead of ending it.
type ending struct {
	testing.TB
	fatal, skip string
}

func (e *ending) Helper()                        {}
func (e *ending) Fatalf(format string, a ...any) { e.fatal = fmt.Sprintf(format, a...) }
func (e *ending) Skip(a ...any)                  { e.skip = fmt.Sprint(a...) }

func TestUnavailableFailsOnlyInCI(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		e := &ending{TB: t}
		Tool(e, "pgbisect-no-such-tool", "apt-get install pgbisect-no-such-package")
		msg := e.fatal + e.skip
		if !strings.Contains(msg, "pgbisect-no-such-tool is not installed: apt-get install pgbisect-no-such-package") {
			t.Errorf("CI=%q: the message does not say what to install: %q", ci, msg)
		}
		if (e.fatal != "") != (ci == "true") || (e.skip != "") != (ci != "true") {
			t.Errorf("CI=%q: failed %q, skipped %q", ci, e.fatal, e.skip)
		}
	}
	t.Setenv("CI", "true")
	e := &ending{TB: t}
	if Tool(e, "sh", "apt-get install dash"); e.fatal != "" || e.skip != "" {
		t.Errorf("a tool on PATH ended the test: %q %q", e.fatal, e.skip)
	}
}
