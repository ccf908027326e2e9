package pgsrc

import (
	"strings"
	"testing"
)

// TestDemoEditSmall: each small edit goes where the large one goes, and
// is the small one.
func TestDemoEditSmall(t *testing.T) {
	pg15 := "{\n" + DemoCopyWork + "\t\tnext;\n"
	if got, err := DemoEdit("small-copy-regression", "copyfromparse.c", 1)(pg15); err != nil || got != "{\n"+DemoCopyWork+demoCopySmall+"\t\tnext;\n" {
		t.Errorf("small COPY regression: %v\n%s", err, got)
	}
	numutils := "\npg_strtoint32(const char *s)\n{\n\twhile (more)\n\t{\n" + demoIntDigit + "\t}\n"
	if got, err := DemoEdit("small-int-regression", "numutils.c", 1)(numutils); err != nil ||
		!strings.Contains(got, demoIntDigit+demoIntSmall+"\t}\n") || strings.Contains(got, "pgbisect_k < 40") {
		t.Errorf("small pg_strtoint32 regression: %v\n%s", err, got)
	}
}
