package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bench/stats"
)

// TestRunPrintNoise: run's table says which metrics look bimodal and
// where the sample's server and clients were pinned.
func TestRunPrintNoise(t *testing.T) {
	xs := []float64{1.0, 2.0, 1.01, 2.02, 0.99, 1.98}
	res := runResult{Scenario: "s", Samples: 6, Points: []runPointResult{{Point: "clients=1",
		Metrics: []runMetricResult{
			{Name: "copy_time", Unit: "s", Summary: stats.Summarize(xs), Values: xs, Bimodal: true},
			{Name: "rows", Unit: "rows", Summary: stats.Summarize([]float64{5, 5})},
		},
		Samples: []bench.Sample{{Env: bench.Environment{CPUs: &bench.Placement{Server: "1", Client: "0"}}}},
	}}}
	var out bytes.Buffer
	if err := runPrintTable(&out, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"copy_time at clients=1 looks bimodal", "server on CPUs 1, pgbisect and clients on 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "rows at clients=1 looks bimodal") {
		t.Errorf("a metric that is not bimodal called so:\n%s", out.String())
	}
}
