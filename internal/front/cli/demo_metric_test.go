package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench"
)

// TestDemoMetric checks the demo's --metric choices: each names a shipped
// scenario that has the metric, of the right kind, and anything else is
// a usage error.
func TestDemoMetric(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"demo", "--metric", "cycles"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), `--metric "cycles": use time (the COPY's elapsed time) or instructions`) {
		t.Errorf("demo --metric cycles: exit %d, %q", code, errb.String())
	}
	for name, want := range map[string]string{"time": "elapsed", "instructions": "instructions"} {
		d := demoMetrics[name]
		sc, err := bench.LoadFile(filepath.Join("../../..", d.scenario))
		if err != nil {
			t.Fatalf("--metric %s: %v", name, err)
		}
		found := false
		for _, m := range sc.MetricSpecs() {
			if m.Name == d.metric {
				found = m.Value == want
			}
		}
		if !found || d.rows <= 0 {
			t.Errorf("--metric %s: scenario %s has no %s metric %s (rows %d)", name, d.scenario, want, d.metric, d.rows)
		}
	}
}
