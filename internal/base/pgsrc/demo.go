package pgsrc

import (
	"fmt"
	"regexp"
	"strings"
)

// The demo's edits of the PostgreSQL source: neutral changes, two clearly
// labelled injected regressions in the paths of the PG16 COPY thread, and
// a commit that breaks the build and its fix.

const (
	// DemoCopyWork is the per-row read of the raw fields in NextCopyFrom
	// (PostgreSQL 15); DemoCopyInjected goes after it.
	DemoCopyWork = `		/* read raw fields in the next line */
		if (!NextCopyFromRawFields(cstate, &field_strings, &fldct))
			return false;
`
	DemoCopyInjected = `
		/*
		 * pgbisect demo: INJECTED REGRESSION. Extra per-row work in COPY FROM,
		 * standing in for the per-row palloc() of 9f8377f7a27 in the PG16
		 * COPY thread.
		 */
		{
			volatile uint32 pgbisect_demo_work = 0;

			for (int pgbisect_i = 0; pgbisect_i < 1000; pgbisect_i++)
				pgbisect_demo_work += pgbisect_i;
		}
`
	demoIntDigit    = "\t\tint8\t\tdigit = (*ptr++ - '0');\n"
	demoIntInjected = `
		/*
		 * pgbisect demo: INJECTED REGRESSION. Extra per-digit work in integer
		 * input, standing in for faff8f8e47f/6fcda9aba83 in the PG16 COPY
		 * thread.
		 */
		for (volatile int pgbisect_k = 0; pgbisect_k < 40; pgbisect_k++)
			;
`
	demoCopySmall = `
		/*
		 * pgbisect demo: INJECTED SMALL REGRESSION. A little per-row work in
		 * COPY FROM (~1-3% of its instructions).
		 */
		{
			volatile uint32 pgbisect_demo_work = 0;

			for (int pgbisect_i = 0; pgbisect_i < 20; pgbisect_i++)
				pgbisect_demo_work += pgbisect_i;
		}
`
	demoIntSmall = `
		/*
		 * pgbisect demo: INJECTED SMALL REGRESSION. A little per-digit work in
		 * integer input (~1-3% of COPY's instructions).
		 */
		{
			static volatile uint32 pgbisect_demo_digits;

			pgbisect_demo_digits++;
		}
`
	demoBreak = "\nstatic int pgbisect_demo_broken = ; /* pgbisect demo: does not compile */\n"
)

// demoCopyWork18 is DemoCopyWork in PostgreSQL 18's copyfromparse.c.
var demoCopyWork18 = regexp.MustCompile(`\n\t/\* read raw fields in the next line \*/\n\tif \(!NextCopyFromRawFields[A-Za-z]*\(cstate, &field_strings, &fldct[^)]*\)\)\n\t\treturn false;\n`)

// DemoEdit returns the edit of the demo's commit number n of kind, to the
// file at path (pgsrc.Commit's edit function). The kinds: comment, doc,
// regress (neutral: a comment, an SGML comment, an SQL comment at the end
// of the file), copy-regression (extra per-row work in NextCopyFrom, in
// src/backend/commands/copyfromparse.c), int-regression (extra per-digit
// work in pg_strtoint32, in src/backend/utils/adt/numutils.c), their small
// versions small-copy-regression and small-int-regression (1-3% of COPY's
// instructions, for 'pgbisect demo --small'), break (a
// line that does not compile) and fix (its removal). 'pgbisect demo' and
// the soak run make their histories with it.
func DemoEdit(kind, path string, n int) func(old string) (string, error) {
	return func(old string) (string, error) {
		switch kind {
		case "comment":
			return old + fmt.Sprintf("\n/* pgbisect demo: neutral change %d, a comment only. */\n", n), nil
		case "doc":
			return old + fmt.Sprintf("<!-- pgbisect demo: neutral documentation change %d -->\n", n), nil
		case "regress":
			return old + fmt.Sprintf("-- pgbisect demo: neutral test change %d\n", n), nil
		case "copy-regression", "small-copy-regression":
			injected := DemoCopyInjected
			if kind == "small-copy-regression" {
				injected = demoCopySmall
			}
			if strings.Contains(old, DemoCopyWork) {
				return strings.Replace(old, DemoCopyWork, DemoCopyWork+injected, 1), nil
			}
			// PostgreSQL 18 reads the raw fields of text and CSV rows in
			// CopyFromTextLikeOneRow, one level less indented.
			m := demoCopyWork18.FindStringIndex(old)
			if m == nil {
				return "", fmt.Errorf("%s: the per-row read of the raw fields (NextCopyFrom, CopyFromTextLikeOneRow) not found", path)
			}
			injected = strings.ReplaceAll(injected, "\n\t\t", "\n\t")
			return old[:m[1]] + injected + old[m[1]:], nil
		case "int-regression", "small-int-regression":
			injected := demoIntInjected
			if kind == "small-int-regression" {
				injected = demoIntSmall
			}
			i := strings.Index(old, "\npg_strtoint32(const char *s)")
			j := strings.Index(old[max(i, 0):], demoIntDigit)
			if i < 0 || j < 0 {
				return "", fmt.Errorf("%s: pg_strtoint32's digit loop not found", path)
			}
			at := i + j + len(demoIntDigit)
			return old[:at] + injected + old[at:], nil
		case "break":
			return old + demoBreak, nil
		case "fix":
			return strings.Replace(old, demoBreak, "\n/* pgbisect demo: the build is fixed. */\n", 1), nil
		}
		return "", fmt.Errorf("unknown demo step kind %q", kind)
	}
}
