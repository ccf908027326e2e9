package bench

import (
	"reflect"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/pgbisect/pgbisect/internal/testkit/fuzztest"
)

// FuzzLoad feeds the scenario loader (strict YAML, then validation) with
// bytes grown from the shipped scenarios. Whatever the bytes: no panic,
// the time bounded, and either an error that starts with the file's name
// and quotes little of it, or a scenario that re-validates: written back
// as YAML it loads again with the same variables, points and metrics.
func FuzzLoad(f *testing.F) {
	for _, data := range fuzztest.Seeds(f, "../configs/scenarios/*.yaml") {
		f.Add(data)
	}
	f.Add([]byte(baseScenario))
	f.Add([]byte("lifecycle: warm\nbetween:\n  - sql: CHECKPOINT\n" + baseScenario))
	f.Add([]byte("matrix:\n  clients: [1, 4]\n" + strings.Replace(baseScenario, "SELECT {{.rows}}", "SELECT {{mul .rows .clients}}", 1)))
	f.Add([]byte("settings_by_version:\n  '>=16':\n    io_combine_limit: 16\n" + baseScenario))
	const name = "fuzz.yaml"
	f.Fuzz(func(t *testing.T, data []byte) {
		var s *Scenario
		var err error
		fuzztest.Within(t, func() { s, err = Load(data, name, nil) })
		if err != nil {
			if s != nil {
				t.Errorf("a scenario and an error: %v", err)
			}
			if !strings.HasPrefix(err.Error(), name) {
				t.Errorf("the error does not start with the file's name: %v", err)
			}
			fuzztest.ShortError(t, err, len(name))
			return
		}
		out, err := yaml.Marshal(s)
		if err != nil {
			t.Fatalf("a loaded scenario does not marshal: %v", err)
		}
		again, err := Load(out, name, nil)
		if err != nil {
			t.Fatalf("a loaded scenario written back does not load: %v\n%s", err, out)
		}
		for _, c := range []struct {
			what      string
			got, want any
		}{{"variables", again.Vars(), s.Vars()}, {"points", pointStrings(again), pointStrings(s)},
			{"metrics", again.MetricSpecs(), s.MetricSpecs()}, {"name", again.Name, s.Name}} {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("%s after a round trip: %v, want %v\n%s", c.what, c.got, c.want, out)
			}
		}
	})
}

func pointStrings(s *Scenario) []string {
	var out []string
	for _, p := range s.Points() {
		out = append(out, p.String())
	}
	return out
}
