package cli

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench/profile"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

func TestCompareProfileUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"-s", runScenario, "--flamegraph", "x.svg", "A", "B"}, "--flamegraph needs --profile"},
		{[]string{"-s", runScenario, "--profile", "--profile-runs", "0", "A", "B"}, "--profile-runs must be 1 or more"},
	} {
		code, _, out := compareMain(t, tt.args...)
		if code != 2 || !strings.Contains(out, tt.err) {
			t.Errorf("compare %q: exit %d, output %q; want 2 and %q", tt.args, code, out, tt.err)
		}
	}
}

// profiledInsert inserts rows; besides its time it records the WAL
// written and asks for pg_stat_io writes, which 15 lacks.
const profiledInsert = `name: profiled-insert
lifecycle: restart
setup:
  - sql: CREATE TABLE t (a int, b text)
workload:
  - name: insert
    sql: TRUNCATE t; INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 100000) g
metrics:
  - {name: insert_time, step: insert, value: elapsed}
  - {name: wal, step: insert, value: wal_bytes, record: true}
  - {name: io, step: insert, value: io_writes}
`

// TestCompareProfile runs compare --profile on Debian's PostgreSQL 15
// against itself: after the verdict each side gets profiled runs with
// perf, the JSON carries the table, and the flame graph is an SVG. The
// recorded WAL metric has values but no say, and the statistic 15 lacks
// has no values (not zeros).
func TestCompareProfile(t *testing.T) {
	bin := runPG15(t)
	citest.Tool(t, "perf", "apt-get install linux-perf")
	state := runState(t)
	dir := t.TempDir()
	svg, scenario := filepath.Join(dir, "flame.svg"), filepath.Join(dir, "insert.yaml")
	if err := os.WriteFile(scenario, []byte(profiledInsert), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-s", scenario, "--state", state, "--max-samples", "6", "--profile", "--profile-runs", "2", "--flamegraph", svg}
	code, res, out := compareMain(t, append(args, "--json", bin, bin)...)
	if code != 0 {
		t.Fatalf("compare exited %d:\n%s", code, out)
	}
	for _, m := range res.Points[0].Metrics {
		switch m.Name {
		case "wal":
			if !m.Record || len(m.A) == 0 || m.A[0] < 1e6 {
				t.Errorf("wal: record %v, values %v; want recorded, > 1 MB", m.Record, m.A)
			}
		case "io":
			if len(m.A)+len(m.B) != 0 {
				t.Errorf("io_writes on 15: values %v %v, want none", m.A, m.B)
			}
		}
	}
	if !strings.Contains(strings.Join(res.Points[0].Env.Warnings, "\n"), "metric io skipped: pg_stat_io is new in PostgreSQL 16") {
		t.Errorf("no note of the skipped statistic: %q", res.Points[0].Env.Warnings)
	}
	p := res.Points[0].Profile
	if p == nil || p.BaseRuns != 2 || p.CulpritRuns != 2 {
		t.Fatalf("profile in JSON: %+v\n%s", p, out)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "no difference can reach p < 0.05") {
		t.Errorf("warnings with 2 runs a side: %q", p.Warnings)
	}
	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name `xml:"svg"`
		G       []struct {
			Title string `xml:"title"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil || len(doc.G) < 3 {
		t.Fatalf("flame graph: %v, %d frames", err, len(doc.G))
	}
	if !strings.Contains(out, "profiled "+res.A+" run 2/2") {
		t.Errorf("no progress of the profiled runs:\n%s", out)
	}
}

func TestComparePrintsProfile(t *testing.T) {
	d := profile.Compare(
		[]profile.Profile{{Stacks: map[string]int{"main;a": 90, "main;grow": 10}, Samples: 100}},
		[]profile.Profile{{Stacks: map[string]int{"main;a": 60, "main;grow": 40}, Samples: 100}})
	s := d.Summary(5)
	var out bytes.Buffer
	res := compareResult{Scenario: "x", A: "a", B: "b", Points: []comparePointResult{{Point: "clients=1", Profile: &s,
		Metrics: []compareMetricResult{{Name: "wal", Unit: "bytes", Record: true}}}}}
	if err := comparePrint(&out, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"point clients=1, B against A. Where the time went", "grow       10.0%    40.0%   +30.0pt", "smallest possible p is 1.00", "(recorded)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
