package cli

import (
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
)

// TestDemoCopyEdit checks the injected COPY regression on the two shapes of
// the per-row read of raw fields: 15's NextCopyFrom (the demo's commits,
// whose hashes the shared builds depend on, must not change) and 18's
// CopyFromTextLikeOneRow, one level less indented.
func TestDemoCopyEdit(t *testing.T) {
	edit := demoStep{kind: "copy-regression", path: "copyfromparse.c"}.edit(1)
	pg15 := "{\n" + pgsrc.DemoCopyWork + "\t\tnext;\n"
	got, err := edit(pg15)
	if err != nil || got != "{\n"+pgsrc.DemoCopyWork+pgsrc.DemoCopyInjected+"\t\tnext;\n" {
		t.Errorf("15's NextCopyFrom: %v\n%s", err, got)
	}
	read18 := "\n\t/* read raw fields in the next line */\n\tif (!NextCopyFromRawFieldsInternal(cstate, &field_strings, &fldct, is_csv))\n\t\treturn false;\n"
	got, err = edit("{" + read18 + "\tnext;\n")
	if err != nil || !strings.HasPrefix(got, "{"+read18+"\n\t/*\n\t * pgbisect demo: INJECTED REGRESSION.") ||
		!strings.Contains(got, "\n\t\tvolatile uint32 pgbisect_demo_work = 0;\n") || !strings.HasSuffix(got, "\t}\n\tnext;\n") {
		t.Errorf("18's CopyFromTextLikeOneRow: %v\n%s", err, got)
	}
	if _, err := edit("no copy here"); err == nil || !strings.Contains(err.Error(), "CopyFromTextLikeOneRow") {
		t.Errorf("a file without the read: %v", err)
	}
}
