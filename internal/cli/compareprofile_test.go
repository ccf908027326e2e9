package cli

import (
	"bytes"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/profile"
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

// TestCompareProfile runs compare --profile on Debian's PostgreSQL 15
// against itself: after the verdict each side gets profiled runs with
// perf, the JSON carries the table, the text prints it, and the flame
// graph is an SVG.
func TestCompareProfile(t *testing.T) {
	bin := runPG15(t)
	if _, err := exec.LookPath("perf"); err != nil {
		t.Skip("perf is not installed (linux-perf)")
	}
	state := runState(t)
	svg := filepath.Join(t.TempDir(), "flame.svg")
	args := []string{"-s", runScenario, "--state", state, "--set", "rows=100000", "--point", "",
		"--max-samples", "6", "--profile", "--profile-runs", "2", "--flamegraph", svg}
	code, res, out := compareMain(t, append(args, "--json", bin, bin)...)
	if code != 0 {
		t.Fatalf("compare exited %d:\n%s", code, out)
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
	res := compareResult{Scenario: "x", A: "a", B: "b", Points: []comparePointResult{{Point: "clients=1", Profile: &s}}}
	if err := comparePrint(&out, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"point clients=1, B against A. Where the time went", "grow       10.0%    40.0%   +30.0pt", "smallest possible p is 1.00"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if flameGraphPath("f.svg", bench.Point{Vars: map[string]string{"clients": "4"}}, 2) != "f-clients4.svg" || flameGraphPath("f.svg", bench.Point{}, 1) != "f.svg" {
		t.Errorf("flame graph paths per point")
	}
}
