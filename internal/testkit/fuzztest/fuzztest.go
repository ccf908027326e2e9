// Package fuzztest holds what pgbisect's fuzz targets share: the time one
// input may take and the bound on how much of an input an error may quote.
// docs/fuzzing.md lists the targets and how to run them.
package fuzztest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Budget is the most one fuzzed input may take. It catches inputs that
// make a parser do work out of proportion to their size (the fuzzer's own
// limits keep inputs to a few KiB), not slow machines: every target's
// seeds take milliseconds.
const Budget = 2 * time.Second

// Within runs fn and fails t when it took longer than Budget.
func Within(t testing.TB, fn func()) {
	t.Helper()
	start := time.Now()
	fn()
	if d := time.Since(start); d > Budget {
		t.Errorf("one input took %s, more than the %s any input may take", d.Round(time.Millisecond), Budget)
	}
}

// MaxErrorBytes bounds an error message about an outside input: it names
// the problem and may quote a line, never pages of the input (the message
// goes back in a GitHub comment, an HTTP answer or a log line).
const MaxErrorBytes = 1024

// ShortError fails t when err's message is longer than MaxErrorBytes
// plus extra (the length of names the caller chose, such as a file name).
func ShortError(t testing.TB, err error, extra int) {
	t.Helper()
	if err != nil && len(err.Error()) > MaxErrorBytes+extra {
		t.Errorf("an error of %d bytes (at most %d): %.300s...", len(err.Error()), MaxErrorBytes+extra, err.Error())
	}
}

// Seeds returns the contents of the files matching pattern (relative to
// the test's package directory), failing f when none match: a seed corpus
// that silently shrank to nothing would test nothing.
func Seeds(f *testing.F, pattern string) [][]byte {
	f.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seed files match %s (%v)", pattern, err)
	}
	var out [][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}
