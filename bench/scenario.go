// Package bench runs benchmark scenarios against installed PostgreSQL builds
// the way PostgreSQL developers do by hand: initdb a private cluster, start
// it on a private socket, run setup steps once, then run and time workload
// steps, and return the metrics of one sample.
//
// The design choice that matters: a Sample is the unit of replication, one
// workload run on a freshly started server (a fresh cluster, or a restart of
// one kept from earlier samples, as the scenario says). Several builds are
// measured by interleaving their samples (A B B A A B ...) so that drift of
// the machine hits every side alike.
package bench

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/internal/base/pgversion"
)

// Lifecycle values: how a sample gets its server.
const (
	// Fresh runs initdb, setup and the workload for every sample, then
	// removes the cluster.
	Fresh = "fresh"
	// Restart keeps one cluster per target and point: initdb and setup run
	// once, and each sample starts the server, runs the workload and stops
	// it again.
	Restart = "restart"
	// Warm keeps one running server per target and point across samples,
	// as a developer measuring a stable server does: initdb and setup run
	// once, and before each sample the Between steps (default: CHECKPOINT)
	// run on it. Samples stay interleaved: every target's server is up,
	// but only one is loaded at a time.
	Warm = "warm"
)

// Scenario is a parsed and validated scenario file. Its exported fields
// mirror the YAML keys; the README describes the format.
type Scenario struct {
	// Name identifies the scenario in reports. Default: the file name
	// without its extension.
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Variables are template variables with their defaults ({{.scale}}).
	// Load's overrides replace them.
	Variables map[string]any `yaml:"variables"`
	// Initdb lists extra initdb options (templated).
	Initdb []string `yaml:"initdb"`
	// Settings are server settings (GUCs) written to postgresql.conf
	// (values templated).
	Settings map[string]any `yaml:"settings"`
	// SettingsByVersion maps server version constraints ("<10",
	// ">=9.6 <13") to settings applied over Settings on servers whose
	// version satisfies them, in file order; a null value leaves a
	// setting out. See docs/scenarios.md. Default: none.
	SettingsByVersion yaml.MapSlice `yaml:"settings_by_version"`
	// Versions are the server versions the scenario can run on. A server
	// outside them is refused before anything is measured (Runner.Check,
	// and Run before every initdb), with a *VersionError naming the
	// constraint and why. Default: any version.
	Versions VersionsSpec `yaml:"versions"`
	// Lifecycle is Fresh, Restart or Warm. Default: fresh.
	Lifecycle string `yaml:"lifecycle"`
	// DropCaches drops the OS page cache before each sample's workload
	// (needs root; a warning otherwise). Default: false.
	DropCaches bool `yaml:"drop_caches"`
	// OS sets kernel settings for each sample (readahead and I/O scheduler
	// of the data directory's device, vm.dirty_*) and puts them back
	// afterwards; needs root. Every sample records them either way.
	// Default: none.
	OS OSSpec `yaml:"os"`
	// Warmup is the number of unrecorded workload runs before the measured
	// one in each sample. Default: 0.
	Warmup int `yaml:"warmup"`
	// ClusterWarmup is the number of unrecorded workload runs on a new
	// cluster, before its first sample's measured run (after the Warmup
	// runs): for a first run on a new cluster that is slower than the
	// rest, at the cost of one run per cluster, not per sample. With the
	// fresh lifecycle every sample has a new cluster. Default: 0.
	ClusterWarmup int      `yaml:"cluster_warmup"`
	Timeouts      Timeouts `yaml:"timeouts"`
	// Matrix maps variables to the values swept; its points are the cross
	// product, the last variable varying fastest.
	Matrix yaml.MapSlice `yaml:"matrix"`
	Setup  []Step        `yaml:"setup"`
	// Between are steps run on a warm server before every sample's
	// workload, the first included (lifecycle warm only). Default: one
	// CHECKPOINT, so no sample inherits the dirty buffers of the one
	// before it.
	Between  []Step      `yaml:"between"`
	Workload []Step      `yaml:"workload"`
	Metrics  []MetricDef `yaml:"metrics"`
	// Stats overrides the statistical thresholds of the config file for
	// this scenario (alpha, confidence, min_effect, start_samples, batch,
	// max_samples, max_time); command-line flags override it in turn.
	// Default: none.
	Stats stats.Overlay `yaml:"stats"`
	// Counter is what counts the instructions of instructions metrics:
	// auto (perf where the machine has hardware counters, else
	// valgrind), perf or valgrind (see counter.go). Default: auto.
	Counter string `yaml:"counter"`
	// CPUs pins the server and its clients to CPUs of their own for each
	// sample (see CPUSpec). Default: none.
	CPUs CPUSpec `yaml:"cpus"`

	// File is the path or name the scenario was loaded from.
	File string `yaml:"-"`

	vars    map[string]string  // defaults with overrides applied
	kinds   map[string]varKind // of each variable and matrix variable, from the file
	axes    []axis             // the matrix, in file order
	metrics []Metric
	byVer   []versionSpec // SettingsByVersion, parsed
	// supported is Versions.Supported, parsed (nil: any version).
	supported *pgversion.Constraint
	native    *Scenario // Native's copy, made once
	ast       *ast.File
}

// Timeouts bound the phases of a sample. Zero means the default.
type Timeouts struct {
	// Start bounds initdb, one server start and one stop. Default: 2m.
	Start time.Duration `yaml:"start"`
	// Setup bounds all setup steps of a cluster. Default: 1h.
	Setup time.Duration `yaml:"setup"`
	// Workload bounds one run of the workload steps. Default: 1h.
	Workload time.Duration `yaml:"workload"`
}

// Step is one setup or workload step: exactly one of SQL, Pgbench, Copy,
// Explain or Shell is set. String fields are Go templates over the
// scenario's variables and the runtime ones (see TemplateVars).
type Step struct {
	// Name is how metrics refer to the step. Default: its kind.
	Name string `yaml:"name"`
	// Timeout bounds this step. Default: the phase's timeout.
	Timeout time.Duration `yaml:"timeout"`
	// DropCaches writes back dirty pages and drops the OS page cache just
	// before this workload step (as root; otherwise the sample records a
	// warning), so the step reads cold even after earlier steps read the
	// same files. Shared buffers are not emptied.
	DropCaches bool `yaml:"drop_caches"`

	// SQL is statements run through pgx (simple protocol, so several
	// statements separated by semicolons are allowed).
	SQL string `yaml:"sql"`
	// Pgbench runs the client tool pgbench against the cluster.
	Pgbench *PgbenchStep `yaml:"pgbench"`
	// Copy runs COPY table FROM a file (one the setup generated).
	Copy *CopyStep `yaml:"copy"`
	// Explain runs EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) of a query.
	Explain string `yaml:"explain"`
	// Shell runs a command, an escape hatch.
	Shell *ShellStep `yaml:"shell"`
}

// PgbenchStep runs pgbench. The connection (PGHOST, PGPORT, PGUSER,
// PGDATABASE) comes from the environment; Args are any other options.
type PgbenchStep struct {
	Args []string `yaml:"args"`
	// Script is an inline custom script, written to a file and passed as
	// -f. Default: none (pgbench's built-in script or Args decide).
	Script string `yaml:"script"`
}

// CopyStep runs COPY Table FROM File.
type CopyStep struct {
	Table string `yaml:"table"`
	File  string `yaml:"file"`
	// Options is the text inside WITH (...), e.g. "FORMAT csv".
	Options string `yaml:"options"`
	// Where is an optional COPY FROM ... WHERE condition.
	Where string `yaml:"where"`
	// Client streams the file through the connection (COPY FROM STDIN)
	// instead of letting the server read it. Default: false.
	Client bool `yaml:"client"`
}

// ShellStep runs Argv directly or, when Script is set, "/bin/sh -c Script".
// It runs as the server's user in the cluster's work directory with
// PGHOST, PGPORT, PGUSER, PGDATABASE and PATH (client tools first) set.
type ShellStep struct {
	Argv   []string `yaml:"argv"`
	Script string   `yaml:"script"`
}

// MetricDef is a metric as written in the scenario file.
type MetricDef struct {
	Name string `yaml:"name"`
	// Step names the workload step the value comes from.
	Step string `yaml:"step"`
	// Value is what is taken from the step; see valueKinds.
	Value string `yaml:"value"`
	// Unit of the value; times convert between s, ms and us. Default: the
	// value's natural unit.
	Unit string `yaml:"unit"`
	// Direction is "lower" or "higher" (is better). Default: from the value.
	Direction string `yaml:"direction"`
	// MinEffect is the smallest relative change of this metric that
	// matters (0.05 = 5%), overriding stats.min_effect for it. Default: 0
	// (the scenario's or the config's).
	MinEffect float64 `yaml:"min_effect"`
	// Record makes the metric recorded and shown but never judged: no
	// verdict waits for it and it decides nothing. Default: false.
	Record bool `yaml:"record"`
	// WaitEvent selects the waits a wait_events metric counts: "Lock",
	// "Lock:advisory" ("type:event" as in pg_stat_activity). Default: every
	// wait of an active session.
	WaitEvent string `yaml:"wait_event"`
	// Interval is how often a wait_events metric samples
	// pg_stat_activity. Default: 10ms.
	Interval time.Duration `yaml:"interval"`
}

// Metric is a validated metric: what Sample.Values holds under Name.
type Metric struct {
	Name      string
	Unit      string
	Direction stats.Direction
	// MinEffect overrides the smallest change that matters for this metric
	// (0: the scenario's or the config's).
	MinEffect float64
	// Step and Value say where the number comes from.
	Step  string
	Value string
	// Record: shown, never judged (MetricDef.Record).
	Record bool
	// WaitEvent and Interval are a wait_events metric's event filter and
	// sampling interval.
	WaitEvent string
	Interval  time.Duration

	scale float64 // natural unit to Unit
}

// Point is one point of the scenario's parameter matrix.
type Point struct {
	// Vars holds the matrix variables and their values at this point.
	Vars map[string]string
}

// String is "clients=4,workers=2" with keys sorted, or "" when the scenario
// has no matrix.
func (p Point) String() string {
	keys := make([]string, 0, len(p.Vars))
	for k := range p.Vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + p.Vars[k]
	}
	return strings.Join(parts, ",")
}

// ParsePoint parses Point.String's form ("clients=4,workers=2").
func ParsePoint(s string) (Point, error) {
	p := Point{Vars: map[string]string{}}
	if s == "" {
		return p, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return p, fmt.Errorf("point %q: want name=value[,name=value...]", s)
		}
		p.Vars[k] = v
	}
	return p, nil
}

type axis struct {
	name   string
	values []string
}

// valueKind says which step kinds provide a value, its natural unit and
// which direction is better by default ("" means the file must say).
type valueKind struct {
	kinds     []string
	unit      string
	direction string
}

var valueKinds = map[string]valueKind{
	"elapsed":          {[]string{"sql", "pgbench", "copy", "explain", "shell"}, "s", "lower"},
	"rows":             {[]string{"copy", "sql"}, "rows", "higher"},
	"tps":              {[]string{"pgbench"}, "tps", "higher"},
	"latency_avg":      {[]string{"pgbench"}, "ms", "lower"},
	"latency_stddev":   {[]string{"pgbench"}, "ms", "lower"},
	"scalar":           {[]string{"sql", "shell"}, "", ""},
	"execution_time":   {[]string{"explain"}, "ms", "lower"},
	"planning_time":    {[]string{"explain"}, "ms", "lower"},
	"shared_hit":       {[]string{"explain"}, "blocks", ""},
	"shared_read":      {[]string{"explain"}, "blocks", ""},
	"shared_dirtied":   {[]string{"explain"}, "blocks", ""},
	"shared_written":   {[]string{"explain"}, "blocks", ""},
	"io_read_time":     {[]string{"explain"}, "ms", "lower"},
	"io_write_time":    {[]string{"explain"}, "ms", "lower"},
	"workers_launched": {[]string{"explain"}, "workers", ""},
	"instructions":     {[]string{"sql", "pgbench", "copy", "explain", "shell"}, "instructions", "lower"},
}

// timeUnits are the time units per second.
var timeUnits = map[string]float64{"s": 1, "ms": 1e3, "us": 1e6}

// stepKinds are the YAML keys that give a step its kind.
var stepKinds = []string{"sql", "pgbench", "copy", "explain", "shell"}

// runtimeVars are template variables the runner provides for every
// cluster; scenario variables may not use these names.
var runtimeVars = []string{"workdir", "datadir", "host", "port", "user", "database", "bindir", "clientbin"}

// Kind is the step's kind: sql, pgbench, copy, explain or shell.
func (st *Step) Kind() string {
	switch {
	case st.Pgbench != nil:
		return "pgbench"
	case st.Copy != nil:
		return "copy"
	case st.Explain != "":
		return "explain"
	case st.Shell != nil:
		return "shell"
	}
	return "sql"
}

// MetricSpecs returns the scenario's metrics in file order.
func (s *Scenario) MetricSpecs() []Metric { return slices.Clone(s.metrics) }

// Vars returns the scenario's variables with overrides applied (not the
// matrix variables).
func (s *Scenario) Vars() map[string]string {
	out := make(map[string]string, len(s.vars))
	for k, v := range s.vars {
		out[k] = v
	}
	return out
}

// Points expands the parameter matrix into its points, the last matrix
// variable varying fastest. A scenario without a matrix has one point with
// no variables.
func (s *Scenario) Points() []Point {
	points := []Point{{Vars: map[string]string{}}}
	for _, ax := range s.axes {
		var next []Point
		for _, p := range points {
			for _, v := range ax.values {
				vars := make(map[string]string, len(p.Vars)+1)
				for k, x := range p.Vars {
					vars[k] = x
				}
				vars[ax.name] = v
				next = append(next, Point{Vars: vars})
			}
		}
		points = next
	}
	return points
}

// FindPoint returns the scenario's point equal to p ("clients=1"), or an
// error listing the points there are.
func (s *Scenario) FindPoint(p string) (Point, error) {
	want, err := ParsePoint(p)
	if err != nil {
		return Point{}, err
	}
	var all []string
	for _, pt := range s.Points() {
		if pt.String() == want.String() {
			return pt, nil
		}
		all = append(all, pt.String())
	}
	return Point{}, fmt.Errorf("scenario %s has no point %q (points: %s)", s.Name, p, strings.Join(all, " "))
}
