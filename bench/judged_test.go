package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// judgedYAML has a trailing shell step whose metric a bisection of q_ms
// does not judge: it leaves a file behind when it runs.
const judgedYAML = `lifecycle: fresh
variables:
  marker: /nonexistent
workload:
  - name: q
    sql: SELECT 1
  - name: rows
    sql: SELECT 2
  - name: touch
    shell:
      script: touch {{.marker}} && echo 7
metrics:
  - {name: q_ms, step: q, value: elapsed, unit: ms}
  - {name: two, step: rows, value: scalar, direction: higher}
  - {name: seven, step: touch, value: scalar, direction: higher}
`

func TestForBisection(t *testing.T) {
	sc, err := Load([]byte(judgedYAML), "judged.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		metric  string
		steps   []string
		metrics []string
	}{
		{"q_ms", []string{"q"}, []string{"q_ms"}},
		{"two", []string{"q", "rows"}, []string{"q_ms", "two"}},
		{"seven", []string{"q", "rows", "touch"}, []string{"q_ms", "two", "seven"}},
	} {
		got, skipped := sc.ForBisection(tc.metric)
		var names []string
		for _, m := range got.MetricSpecs() {
			names = append(names, m.Name)
		}
		if !slices.Equal(got.WorkloadSteps(), tc.steps) || !slices.Equal(names, tc.metrics) {
			t.Errorf("ForBisection(%s): steps %q metrics %q, want %q %q", tc.metric, got.WorkloadSteps(), names, tc.steps, tc.metrics)
		}
		if n := len(sc.Workload) - len(tc.steps); len(skipped) != n || (n == 0) != (got == sc) {
			t.Errorf("ForBisection(%s): skipped %q, same scenario %v", tc.metric, skipped, got == sc)
		}
	}
	if !slices.Equal(sc.WorkloadSteps(), []string{"q", "rows", "touch"}) || len(sc.MetricSpecs()) != 3 {
		t.Error("ForBisection changed the scenario it was given")
	}

	// A recorded metric's step runs: it is shown with every sample.
	rec, err := Load([]byte(judgedYAML+"  - {name: seven_rec, step: touch, value: scalar, direction: higher, record: true}\n"), "rec.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, skipped := rec.ForBisection("q_ms"); got != rec || skipped != nil {
		t.Errorf("a recorded metric's step was left out: %q", skipped)
	}
}

// TestForBisectionRunsFewerSteps takes a sample of the full scenario (as
// pgbisect run does) and one of the scenario a bisection of q_ms runs, on
// a real server: the trailing shell step leaves its file only in the
// first.
func TestForBisectionRunsFewerSteps(t *testing.T) {
	bin := pgBin(t)
	r, _ := newTestRunner(t)
	dir, err := os.MkdirTemp("", "pgbisect-judged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777) // the step runs as the server's user
	marker := filepath.Join(dir, "ran")
	// The path is written into the file: a value set from outside may only
	// be a word (varKind).
	sc, err := Load([]byte(strings.Replace(judgedYAML, "marker: /nonexistent", "marker: "+marker, 1)), "judged.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	target := Target{Name: "pg", BinDir: bin}
	full, err := r.Run(ctx, sc, target, Point{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil || full.Values["seven"] != 7 {
		t.Fatalf("the full workload did not run its last step: %v, values %v", err, full.Values)
	}
	os.Remove(marker)
	judged, skipped := sc.ForBisection("q_ms")
	if !slices.Equal(skipped, []string{"rows", "touch"}) {
		t.Fatalf("skipped %q", skipped)
	}
	s, err := r.Run(ctx, judged, target, Point{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a bisection sample of q_ms ran the trailing step")
	}
	if _, ok := s.Values["q_ms"]; !ok || len(s.Values) != 1 {
		t.Errorf("bisection sample values %v, want q_ms alone", s.Values)
	}
}
