package bench

import (
	"math"
	"os"
	"reflect"
	"testing"
)

// TestParsePgbench parses real pgbench 15 output (testdata/pgbench-15.txt,
// from Debian's postgresql-15) and the format of pgbench 13 and older,
// which printed tps twice.
func TestParsePgbench(t *testing.T) {
	cases := []struct {
		file   string
		values map[string]float64
		tps    []float64
		lat    []float64
	}{
		{"testdata/pgbench-15.txt",
			map[string]float64{"tps": 298.084017, "latency_avg": 6.698, "latency_stddev": 8.377, "failed": 0, "transactions": 846},
			[]float64{194.0, 310.6, 330.7}, []float64{8.269, 6.392, 5.903}},
		{"testdata/pgbench-13.txt",
			map[string]float64{"tps": 418.370262, "latency_avg": 2.390, "latency_stddev": 0.733, "transactions": 836},
			[]float64{410.9, 425.1}, []float64{2.425, 2.351}},
	}
	for _, c := range cases {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		r := parsePgbench(string(b))
		if !reflect.DeepEqual(r.values, c.values) {
			t.Errorf("%s: values %v, want %v", c.file, r.values, c.values)
		}
		if !reflect.DeepEqual(r.series["tps"], c.tps) || !reflect.DeepEqual(r.series["latency"], c.lat) {
			t.Errorf("%s: series %v, want tps %v latency %v", c.file, r.series, c.tps, c.lat)
		}
	}
	if r := parsePgbench("pgbench: error: connection to server failed\n"); len(r.values) != 0 {
		t.Errorf("error output gave values %v", r.values)
	}
}

func TestParseExplain(t *testing.T) {
	b, err := os.ReadFile("testdata/explain-15.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := parseExplain(b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"shared_hit": 2253, "shared_read": 11, "shared_dirtied": 0, "shared_written": 0,
		"io_read_time": 0.912, "io_write_time": 0, "workers_launched": 2}
	for k, w := range want {
		if math.Abs(v[k]-w) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, v[k], w)
		}
	}
	if v["execution_time"] <= 0 || v["planning_time"] <= 0 {
		t.Errorf("times %v %v, want positive", v["execution_time"], v["planning_time"])
	}
	if _, err := parseExplain([]byte(`[{"Plan": null}]`)); err == nil {
		t.Error("a plan-less EXPLAIN parsed without error")
	}
}
