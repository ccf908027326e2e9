package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/testkit/fuzztest"
)

// The fuzz targets of this file read what binaries built from a patch
// print or write: pgbench's report, the server's EXPLAIN JSON, postgres
// --describe-config and its complaint about a -c option, and the files of
// the instruction counters (perf stat -x, and cachegrind's, which the
// server's user can rewrite). A patch is anyone's code, so whatever the
// bytes: no panic, the time bounded, and figures that the statistics can
// take (finite, and not negative where a count or a time is).

// finite fails t for a NaN or an infinity, or a negative value when
// nonNegative.
func finite(t *testing.T, what string, v float64, nonNegative bool) {
	t.Helper()
	if math.IsNaN(v) || math.IsInf(v, 0) {
		t.Errorf("%s = %v: not a finite number", what, v)
	}
	if nonNegative && v < 0 {
		t.Errorf("%s = %v: negative", what, v)
	}
}

// FuzzParsePgbench feeds parsePgbench with pgbench reports of 13 and 15
// (progress lines, both tps lines). Every figure is finite and not
// negative, and the progress series of tps and latency have one value per
// progress line each.
func FuzzParsePgbench(f *testing.F) {
	for _, data := range fuzztest.Seeds(f, "testdata/pgbench-*.txt") {
		f.Add(string(data))
	}
	f.Add("tps = 1.5 (including connections establishing)\ntps = 2.5 (excluding connections establishing)\n")
	f.Add("progress: 1.0 s, 194.0 tps, lat 8.269 ms stddev NaN, 0 failed\n")
	f.Fuzz(func(t *testing.T, out string) {
		var r pgbenchResult
		fuzztest.Within(t, func() { r = parsePgbench(out) })
		for k, v := range r.values {
			finite(t, k, v, true)
		}
		if len(r.series["tps"]) != len(r.series["latency"]) {
			t.Errorf("%d tps values and %d latencies", len(r.series["tps"]), len(r.series["latency"]))
		}
		if n := strings.Count(out, "progress: "); len(r.series["tps"]) > n {
			t.Errorf("%d progress values from %d progress lines", len(r.series["tps"]), n)
		}
		for k, s := range r.series {
			for _, v := range s {
				finite(t, k, v, true)
			}
		}
	})
}

// FuzzParseExplain feeds parseExplain with EXPLAIN (ANALYZE, BUFFERS,
// FORMAT JSON) output. Either an error that says it is about EXPLAIN and
// quotes little, or the two times and a worker count, all finite (JSON
// has no NaN), the worker count not negative unless the input has a
// negative "Workers Launched".
func FuzzParseExplain(f *testing.F) {
	for _, data := range fuzztest.Seeds(f, "testdata/explain-*.json") {
		f.Add(data)
	}
	f.Add([]byte(`[{"Plan": {"Workers Launched": 2, "Plans": [{"Workers Launched": 1, "Plans": [{}]}]}, "Execution Time": 1.5}]`))
	f.Add([]byte(`[{"Plan": {"Plans": [[], 1, {"Plans": {}}]}}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, js []byte) {
		var v map[string]float64
		var err error
		fuzztest.Within(t, func() { v, err = parseExplain(js) })
		if err != nil {
			if v != nil {
				t.Errorf("figures and an error: %v", err)
			}
			if !strings.Contains(err.Error(), "EXPLAIN") {
				t.Errorf("the error does not say it is about EXPLAIN: %v", err)
			}
			fuzztest.ShortError(t, err, 0)
			return
		}
		for _, k := range []string{"execution_time", "planning_time", "workers_launched"} {
			if _, ok := v[k]; !ok {
				t.Errorf("no %s in %v", k, v)
			}
		}
		for k, x := range v {
			finite(t, k, x, false)
		}
		if v["workers_launched"] < 0 && !bytes.Contains(js, []byte("-")) {
			t.Errorf("workers_launched %v with no negative number in the input", v["workers_launched"])
		}
	})
}

// FuzzParseDescribeConfig feeds parseDescribeConfig with postgres
// --describe-config output (name, context, group, type, default... per
// line, tab-separated), and parseRejection with what postgres says of a
// -c option. Every setting name is a non-empty line's first field, with
// no tab or newline in it; a rejection's message and name come from the
// output.
func FuzzParseDescribeConfig(f *testing.F) {
	f.Add([]byte("allow_system_table_mods\tpostmaster\tDeveloper Options\tBOOLEAN\tfalse\t\t\tAllows modifications of the structure of system tables.\t\n" +
		"work_mem\tuser\tResource Usage / Memory\tINTEGER\t4096\t64\t2147483647\tSets the maximum memory.\t\n"))
	f.Add([]byte("2024-01-01 FATAL:  unrecognized configuration parameter \"foo\"\n"))
	f.Add([]byte("FATAL:  invalid value for parameter \"work_mem\": \"x\"\nHINT:  Valid units for this parameter are \"kB\".\n"))
	f.Add([]byte("\t\t\n\n\r\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		var names map[string]bool
		var rej *Rejection
		fuzztest.Within(t, func() {
			names = parseDescribeConfig(out)
			rej = parseRejection(out)
		})
		for n := range names {
			if n == "" || strings.ContainsAny(n, "\t\n") {
				t.Errorf("setting name %q", n)
			}
			if !bytes.HasPrefix(out, []byte(n+"\t")) && !bytes.Contains(out, []byte("\n"+n+"\t")) {
				t.Errorf("setting name %q is not the first field of a line", n)
			}
		}
		if rej == nil {
			t.Fatal("no rejection")
		}
		if !bytes.Contains(out, []byte(rej.Message)) {
			t.Errorf("the rejection's message %q is not in the output", rej.Message)
		}
		if rej.Name != "" && !strings.Contains(rej.Message, `"`+rej.Name+`"`) {
			t.Errorf("the rejected name %q is not quoted in the message %q", rej.Name, rej.Message)
		}
		if rej.Unknown && rej.Name == "" {
			t.Error("an unknown setting without its name")
		}
	})
}

// FuzzParseCounters feeds the readers of the instruction counters' files:
// cachegrind's out file, which the server's user owns and a patched
// server can rewrite, and perf stat -x output. A count is finite and not
// negative, or there is none (an error from parseCachegrind).
func FuzzParseCounters(f *testing.F) {
	f.Add([]byte("desc: I1 cache: none\ncmd: postgres\nevents: Ir\nfl=x.c\nfn=main\n1 5\nsummary: 321840012\n"))
	f.Add([]byte("summary: NaN\n"))
	f.Add([]byte("summary:\n"))
	f.Add([]byte("# started on x\n\n123456789,,instructions:u,1000,100.00,,\n"))
	f.Add([]byte("<not supported>,,instructions:u,0,100.00,,\n-1,,x,\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var cg, ps float64
		var err error
		var ok bool
		fuzztest.Within(t, func() {
			cg, err = parseCachegrind(data)
			ps, ok = parsePerfStat(string(data))
		})
		if err == nil {
			finite(t, "the cachegrind count", cg, true)
		} else {
			fuzztest.ShortError(t, err, 0)
		}
		if ok {
			finite(t, "the perf stat count", ps, true)
		}
	})
}
