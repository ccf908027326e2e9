package bench

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// pgbenchResult holds the figures parsed from pgbench's output.
type pgbenchResult struct {
	values map[string]float64
	series map[string][]float64
}

var (
	// "tps = 1234.5 (without initial connection time)" (PostgreSQL 14+),
	// "tps = 1234.5 (excluding connections establishing)" (older).
	pgbenchTPS     = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(([^)]*)\)`)
	pgbenchLatAvg  = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
	pgbenchLatStd  = regexp.MustCompile(`(?m)^latency stddev = ([0-9.]+) ms`)
	pgbenchFailed  = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
	pgbenchProcess = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
	// "progress: 1.0 s, 1234.5 tps, lat 1.234 ms stddev 0.567, 0 failed"
	pgbenchProgress = regexp.MustCompile(`(?m)^progress: ([0-9.]+) s, ([0-9.]+) tps, lat ([0-9.]+) ms stddev ([0-9.NaN]+)`)
)

// parsePgbench extracts tps, latency average and stddev, and the -P
// progress series (tps and latency per interval) from pgbench output
// (stdout and stderr together). Figures pgbench did not print are absent.
func parsePgbench(out string) pgbenchResult {
	r := pgbenchResult{values: map[string]float64{}, series: map[string][]float64{}}
	for _, m := range pgbenchTPS.FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			continue
		}
		// Prefer the figure without connection time when both are printed.
		if _, seen := r.values["tps"]; !seen || strings.Contains(m[2], "without") || strings.Contains(m[2], "excluding") {
			r.values["tps"] = v
		}
	}
	set := func(re *regexp.Regexp, key string) {
		if m := re.FindStringSubmatch(out); m != nil {
			if v, err := strconv.ParseFloat(m[1], 64); err == nil {
				r.values[key] = v
			}
		}
	}
	set(pgbenchLatAvg, "latency_avg")
	set(pgbenchLatStd, "latency_stddev")
	set(pgbenchFailed, "failed")
	set(pgbenchProcess, "transactions")
	for _, m := range pgbenchProgress.FindAllStringSubmatch(out, -1) {
		tps, err1 := strconv.ParseFloat(m[2], 64)
		lat, err2 := strconv.ParseFloat(m[3], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		r.series["tps"] = append(r.series["tps"], tps)
		r.series["latency"] = append(r.series["latency"], lat)
	}
	return r
}

// explainPlan is the part of EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) output
// that metrics read. The top plan node's buffer and I/O figures include its
// children's.
type explainPlan struct {
	Plan          map[string]any `json:"Plan"`
	PlanningTime  float64        `json:"Planning Time"`
	ExecutionTime float64        `json:"Execution Time"`
}

// parseExplain returns the execution and planning times (ms), shared buffer
// counts (blocks), I/O read and write times (ms, with track_io_timing) and
// the number of parallel workers launched.
func parseExplain(js []byte) (map[string]float64, error) {
	var plans []explainPlan
	if err := json.Unmarshal(js, &plans); err != nil {
		return nil, fmt.Errorf("parsing EXPLAIN JSON: %w", err)
	}
	if len(plans) == 0 || plans[0].Plan == nil {
		return nil, fmt.Errorf("EXPLAIN JSON has no plan")
	}
	p := plans[0]
	v := map[string]float64{
		"execution_time": p.ExecutionTime,
		"planning_time":  p.PlanningTime,
	}
	num := func(keys ...string) (float64, bool) {
		for _, k := range keys {
			if x, ok := p.Plan[k].(float64); ok {
				return x, true
			}
		}
		return 0, false
	}
	for metric, keys := range map[string][]string{
		"shared_hit":     {"Shared Hit Blocks"},
		"shared_read":    {"Shared Read Blocks"},
		"shared_dirtied": {"Shared Dirtied Blocks"},
		"shared_written": {"Shared Written Blocks"},
		// PostgreSQL 17 split I/O timings by buffer kind.
		"io_read_time":  {"I/O Read Time", "Shared I/O Read Time"},
		"io_write_time": {"I/O Write Time", "Shared I/O Write Time"},
	} {
		if x, ok := num(keys...); ok {
			v[metric] = x
		}
	}
	v["workers_launched"] = workersLaunched(p.Plan)
	return v, nil
}

// workersLaunched sums "Workers Launched" over the plan tree.
func workersLaunched(node map[string]any) float64 {
	n, _ := node["Workers Launched"].(float64)
	if kids, ok := node["Plans"].([]any); ok {
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				n += workersLaunched(m)
			}
		}
	}
	return n
}
