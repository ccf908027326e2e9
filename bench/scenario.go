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
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/internal/config"
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
)

// Scenario is a parsed and validated scenario file. Its exported fields
// mirror the YAML keys; see /tmp/readme-bench.md for the format.
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
	// Lifecycle is Fresh or Restart. Default: fresh.
	Lifecycle string `yaml:"lifecycle"`
	// DropCaches drops the OS page cache before each sample's workload
	// (needs root; a warning otherwise). Default: false.
	DropCaches bool `yaml:"drop_caches"`
	// Warmup is the number of unrecorded workload runs before the measured
	// one in each sample. Default: 0.
	Warmup   int      `yaml:"warmup"`
	Timeouts Timeouts `yaml:"timeouts"`
	// Matrix maps variables to the values swept; its points are the cross
	// product, the last variable varying fastest.
	Matrix   yaml.MapSlice `yaml:"matrix"`
	Setup    []Step        `yaml:"setup"`
	Workload []Step        `yaml:"workload"`
	Metrics  []MetricDef   `yaml:"metrics"`

	// File is the path or name the scenario was loaded from.
	File string `yaml:"-"`

	vars    map[string]string // defaults with overrides applied
	axes    []axis            // the matrix, in file order
	metrics []Metric
	ast     *ast.File
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
}

// Metric is a validated metric: what Sample.Values holds under Name.
type Metric struct {
	Name      string
	Unit      string
	Direction stats.Direction
	// Step and Value say where the number comes from.
	Step  string
	Value string

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
}

// timeUnits are the time units per second.
var timeUnits = map[string]float64{"s": 1, "ms": 1e3, "us": 1e6}

// stepKinds are the YAML keys that give a step its kind.
var stepKinds = []string{"sql", "pgbench", "copy", "explain", "shell"}

// runtimeVars are template variables the runner provides for every
// cluster; scenario variables may not use these names.
var runtimeVars = []string{"workdir", "datadir", "host", "port", "user", "database", "bindir", "clientbin"}

// LoadFile reads, parses and validates the scenario at path.
func LoadFile(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	return Load(data, path, nil)
}

// LoadFileWith is LoadFile with variable overrides (see Load).
func LoadFileWith(path string, overrides map[string]string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	return Load(data, path, overrides)
}

// Load parses and validates a scenario; name (usually the file path) is
// used in errors and as the default scenario name. overrides set variables
// ("scale" -> "100"); for a matrix variable the value may be a
// comma-separated list that replaces the swept values ("clients=1,4").
// Errors name the file and line, with a hint for likely typos.
func Load(data []byte, name string, overrides map[string]string) (*Scenario, error) {
	s := &Scenario{}
	if err := yaml.UnmarshalWithOptions(data, s, yaml.DisallowUnknownField()); err != nil {
		return nil, config.YAMLError(name, positioned(data, err), knownKeys)
	}
	s.File = name
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, config.YAMLError(name, err, knownKeys)
	}
	s.ast = f
	if err := s.validate(overrides); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("%s: %s", s.where(fe.path), fe.msg)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// positioned gives a go-yaml error that carries no position (a bad
// duration, for one) the line of the value it quotes, in go-yaml's own
// "[line:column] message" form that config.YAMLError understands.
func positioned(data []byte, err error) error {
	msg := err.Error()
	if strings.HasPrefix(msg, "[") {
		return err
	}
	q := quoted.FindStringSubmatch(msg)
	if q == nil {
		return err
	}
	val, uerr := strconv.Unquote(q[0])
	if uerr != nil {
		return err
	}
	for _, tk := range lexer.Tokenize(string(data)) {
		if tk.Value == val && tk.Position != nil {
			msg = strings.TrimPrefix(msg, "time: ")
			return fmt.Errorf("[%d:%d] %s", tk.Position.Line, tk.Position.Column, msg)
		}
	}
	return err
}

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// knownKeys are every key of the format, for "did you mean" hints.
var knownKeys = []string{"name", "description", "variables", "initdb", "settings", "lifecycle",
	"drop_caches", "warmup", "timeouts", "start", "setup", "workload", "matrix", "metrics",
	"timeout", "sql", "pgbench", "copy", "explain", "shell", "args", "script", "table", "file",
	"options", "where", "client", "argv", "step", "value", "unit", "direction"}

// fieldError is a validation error at a YAML path ("$.workload[1].sql").
type fieldError struct {
	path, msg string
}

func (e *fieldError) Error() string { return e.path + ": " + e.msg }

func errAt(path, format string, args ...any) error {
	return &fieldError{path: path, msg: fmt.Sprintf(format, args...)}
}

// where turns a YAML path into "file:line", falling back to the nearest
// enclosing node that exists and then to the file alone.
func (s *Scenario) where(path string) string {
	for p := path; p != "$" && p != ""; p = parentPath(p) {
		yp, err := yaml.PathString(p)
		if err != nil {
			continue
		}
		n, err := yp.FilterFile(s.ast)
		if err != nil || n == nil || n.GetToken() == nil {
			continue
		}
		return fmt.Sprintf("%s:%d", s.File, n.GetToken().Position.Line)
	}
	return s.File
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i <= 0 {
		return "$"
	}
	return p[:i]
}

func (s *Scenario) validate(overrides map[string]string) error {
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(s.File), filepath.Ext(s.File))
	}
	switch s.Lifecycle {
	case "":
		s.Lifecycle = Fresh
	case Fresh, Restart:
	default:
		return errAt("$.lifecycle", "lifecycle %q: use fresh (initdb for every sample) or restart (one cluster, restarted for every sample)", s.Lifecycle)
	}
	if s.Warmup < 0 {
		return errAt("$.warmup", "warmup must be 0 or more runs")
	}
	if s.Timeouts.Start == 0 {
		s.Timeouts.Start = 2 * time.Minute
	}
	if s.Timeouts.Setup == 0 {
		s.Timeouts.Setup = time.Hour
	}
	if s.Timeouts.Workload == 0 {
		s.Timeouts.Workload = time.Hour
	}
	if err := s.validateVars(overrides); err != nil {
		return err
	}
	if len(s.Workload) == 0 {
		return errAt("$", "no workload steps: add a workload list with at least one step")
	}
	steps := map[string]*Step{}
	for _, ph := range []struct {
		name  string
		steps []Step
	}{{"setup", s.Setup}, {"workload", s.Workload}} {
		for i := range ph.steps {
			st := &ph.steps[i]
			path := fmt.Sprintf("$.%s[%d]", ph.name, i)
			if err := validateStep(st, path); err != nil {
				return err
			}
			if ph.name == "workload" {
				if _, dup := steps[st.Name]; dup {
					return errAt(path, "two workload steps are named %q: give each a distinct name", st.Name)
				}
				steps[st.Name] = st
			}
		}
	}
	if err := s.validateTemplates(); err != nil {
		return err
	}
	return s.validateMetrics(steps)
}

func (s *Scenario) validateVars(overrides map[string]string) error {
	s.vars = map[string]string{}
	for k, v := range s.Variables {
		path := "$.variables." + k
		if slices.Contains(runtimeVars, k) {
			return errAt(path, "variable %q is set by the runner: choose another name", k)
		}
		str, err := scalarString(v)
		if err != nil {
			return errAt(path, "variable %q: %v", k, err)
		}
		s.vars[k] = str
	}
	for _, item := range s.Matrix {
		k, ok := item.Key.(string)
		if !ok {
			return errAt("$.matrix", "matrix keys must be variable names")
		}
		path := "$.matrix." + k
		if slices.Contains(runtimeVars, k) {
			return errAt(path, "matrix variable %q is set by the runner: choose another name", k)
		}
		list, ok := item.Value.([]any)
		if !ok || len(list) == 0 {
			return errAt(path, "matrix %q must be a non-empty list of values, like [1, 2, 4]", k)
		}
		ax := axis{name: k}
		for i, v := range list {
			str, err := scalarString(v)
			if err != nil {
				return errAt(fmt.Sprintf("%s[%d]", path, i), "matrix %q: %v", k, err)
			}
			ax.values = append(ax.values, str)
		}
		s.axes = append(s.axes, ax)
	}
	names := s.varNames()
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := overrides[k]
		if i := slices.IndexFunc(s.axes, func(a axis) bool { return a.name == k }); i >= 0 {
			s.axes[i].values = strings.Split(v, ",")
			continue
		}
		if _, ok := s.vars[k]; !ok {
			msg := fmt.Sprintf("--set %s: the scenario has no variable %q", k, k)
			if c := config.Closest(k, names); c != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", c)
			} else {
				msg += fmt.Sprintf(" (it has: %s)", strings.Join(names, ", "))
			}
			return errors.New(msg)
		}
		s.vars[k] = v
	}
	return nil
}

func (s *Scenario) varNames() []string {
	var names []string
	for k := range s.vars {
		names = append(names, k)
	}
	for _, a := range s.axes {
		names = append(names, a.name)
	}
	sort.Strings(names)
	return names
}

func scalarString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int, int64, uint64, float64:
		return fmt.Sprint(x), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("value must be a string, number or boolean, not %T", v)
}

func validateStep(st *Step, path string) error {
	var kinds []string
	if st.SQL != "" {
		kinds = append(kinds, "sql")
	}
	if st.Pgbench != nil {
		kinds = append(kinds, "pgbench")
	}
	if st.Copy != nil {
		kinds = append(kinds, "copy")
	}
	if st.Explain != "" {
		kinds = append(kinds, "explain")
	}
	if st.Shell != nil {
		kinds = append(kinds, "shell")
	}
	switch len(kinds) {
	case 0:
		return errAt(path, "step has no kind: give it one of %s", strings.Join(stepKinds, ", "))
	case 1:
	default:
		return errAt(path, "step has several kinds (%s): split it into one step per kind", strings.Join(kinds, ", "))
	}
	if st.Name == "" {
		st.Name = kinds[0]
	}
	if st.Timeout < 0 {
		return errAt(path+".timeout", "timeout must be positive")
	}
	if c := st.Copy; c != nil {
		if c.Table == "" {
			return errAt(path+".copy", "copy needs a table")
		}
		if c.File == "" {
			return errAt(path+".copy", "copy needs a file (one the setup generated, e.g. {{.workdir}}/data.txt)")
		}
	}
	if sh := st.Shell; sh != nil {
		if (len(sh.Argv) == 0) == (sh.Script == "") {
			return errAt(path+".shell", "shell needs exactly one of argv (a command and its arguments) or script (run by /bin/sh -c)")
		}
	}
	return nil
}

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

// templates lists every templated string of the scenario with its YAML
// path, so validation and expansion walk the same fields.
func (s *Scenario) templates(visit func(path string, text *string)) {
	for i := range s.Initdb {
		visit(fmt.Sprintf("$.initdb[%d]", i), &s.Initdb[i])
	}
	for _, ph := range []struct {
		name  string
		steps []Step
	}{{"setup", s.Setup}, {"workload", s.Workload}} {
		for i := range ph.steps {
			st := &ph.steps[i]
			p := fmt.Sprintf("$.%s[%d]", ph.name, i)
			visit(p+".sql", &st.SQL)
			visit(p+".explain", &st.Explain)
			if b := st.Pgbench; b != nil {
				for j := range b.Args {
					visit(fmt.Sprintf("%s.pgbench.args[%d]", p, j), &b.Args[j])
				}
				visit(p+".pgbench.script", &b.Script)
			}
			if c := st.Copy; c != nil {
				visit(p+".copy.table", &c.Table)
				visit(p+".copy.file", &c.File)
				visit(p+".copy.options", &c.Options)
				visit(p+".copy.where", &c.Where)
			}
			if sh := st.Shell; sh != nil {
				for j := range sh.Argv {
					visit(fmt.Sprintf("%s.shell.argv[%d]", p, j), &sh.Argv[j])
				}
				visit(p+".shell.script", &sh.Script)
			}
		}
	}
}

// validateTemplates parses every template and executes it at every point
// with placeholder runtime values, so a typo fails at load time and not an
// hour into a bisection.
func (s *Scenario) validateTemplates() error {
	names := s.varNames()
	names = append(names, runtimeVars...)
	points := s.Points()
	var first error
	check := func(path, text string) {
		if first != nil || !strings.Contains(text, "{{") {
			return
		}
		tmpl, err := newTemplate(path, text)
		if err != nil {
			first = errAt(path, "bad template: %s", cleanTemplateError(err))
			return
		}
		for _, pt := range points {
			if err := tmpl.Execute(&bytes.Buffer{}, s.templateData(pt, placeholderRuntime)); err != nil {
				first = errAt(path, "%s", templateExecError(err, names))
				return
			}
		}
	}
	s.templates(func(path string, text *string) { check(path, *text) })
	for k, v := range s.Settings {
		str, err := scalarString(v)
		if err != nil {
			return errAt("$.settings."+k, "setting %q: %v", k, err)
		}
		check("$.settings."+k, str)
	}
	return first
}

var placeholderRuntime = map[string]string{
	"workdir": "/WORKDIR", "datadir": "/DATADIR", "host": "/HOST", "port": "5432",
	"user": "postgres", "database": "postgres", "bindir": "/BINDIR", "clientbin": "/CLIENTBIN",
}

func newTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Option("missingkey=error").Funcs(templateFuncs).Parse(text)
}

// templateFuncs are arithmetic helpers for sizes ({{mul .scale 100000}}).
var templateFuncs = template.FuncMap{
	"add": func(a, b any) (int64, error) { return arith(a, b, func(x, y int64) int64 { return x + y }) },
	"sub": func(a, b any) (int64, error) { return arith(a, b, func(x, y int64) int64 { return x - y }) },
	"mul": func(a, b any) (int64, error) { return arith(a, b, func(x, y int64) int64 { return x * y }) },
	"div": func(a, b any) (int64, error) {
		if n, err := toInt(b); err == nil && n == 0 {
			return 0, errors.New("division by zero")
		}
		return arith(a, b, func(x, y int64) int64 { return x / y })
	},
}

func arith(a, b any, f func(x, y int64) int64) (int64, error) {
	x, err := toInt(a)
	if err != nil {
		return 0, err
	}
	y, err := toInt(b)
	if err != nil {
		return 0, err
	}
	return f(x, y), nil
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not an integer", x)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%v is not an integer", v)
}

func cleanTemplateError(err error) string {
	msg := err.Error()
	// "template: $.setup[0].sql:1: unexpected ..." -> "unexpected ..."
	if i := strings.Index(msg, ": "); strings.HasPrefix(msg, "template: ") && i >= 0 {
		rest := msg[len("template: "):]
		if j := strings.Index(rest, ": "); j >= 0 {
			return rest[j+2:]
		}
	}
	return msg
}

func templateExecError(err error, names []string) string {
	msg := err.Error()
	const noKey = `map has no entry for key "`
	if i := strings.Index(msg, noKey); i >= 0 {
		key := msg[i+len(noKey):]
		key = key[:strings.IndexByte(key, '"')]
		out := fmt.Sprintf("unknown variable %q in template", key)
		if c := config.Closest(key, names); c != "" {
			out += fmt.Sprintf(" (did you mean %q?)", c)
		}
		return out
	}
	if i := strings.Index(msg, "error calling "); i >= 0 {
		return "template: " + msg[i:]
	}
	return "template: " + cleanTemplateError(err)
}

func (s *Scenario) validateMetrics(steps map[string]*Step) error {
	if len(s.Metrics) == 0 {
		return errAt("$", "no metrics: add a metrics list (for example the elapsed time of a workload step)")
	}
	stepNames := make([]string, 0, len(steps))
	for n := range steps {
		stepNames = append(stepNames, n)
	}
	sort.Strings(stepNames)
	valueNames := make([]string, 0, len(valueKinds))
	for n := range valueKinds {
		valueNames = append(valueNames, n)
	}
	sort.Strings(valueNames)
	seen := map[string]bool{}
	for i, md := range s.Metrics {
		path := fmt.Sprintf("$.metrics[%d]", i)
		if md.Name == "" {
			return errAt(path, "metric needs a name")
		}
		if seen[md.Name] {
			return errAt(path+".name", "two metrics are named %q", md.Name)
		}
		seen[md.Name] = true
		st, ok := steps[md.Step]
		if !ok {
			msg := fmt.Sprintf("metric %q: no workload step named %q", md.Name, md.Step)
			if c := config.Closest(md.Step, stepNames); c != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", c)
			} else {
				msg += fmt.Sprintf(" (workload steps: %s)", strings.Join(stepNames, ", "))
			}
			return errAt(path+".step", "%s", msg)
		}
		vk, ok := valueKinds[md.Value]
		if !ok {
			msg := fmt.Sprintf("metric %q: unknown value %q", md.Name, md.Value)
			if c := config.Closest(md.Value, valueNames); c != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", c)
			} else {
				msg += fmt.Sprintf(" (values: %s)", strings.Join(valueNames, ", "))
			}
			return errAt(path+".value", "%s", msg)
		}
		kind := st.Kind()
		if !slices.Contains(vk.kinds, kind) {
			return errAt(path+".value", "metric %q: a %s step has no %q value (%q comes from %s steps)", md.Name, kind, md.Value, md.Value, strings.Join(vk.kinds, ", "))
		}
		m := Metric{Name: md.Name, Step: md.Step, Value: md.Value, Unit: md.Unit, scale: 1}
		if m.Unit == "" {
			m.Unit = vk.unit
		}
		if from, ok := timeUnits[vk.unit]; ok {
			to, ok := timeUnits[m.Unit]
			if !ok {
				return errAt(path+".unit", "metric %q: %s is a time: use unit s, ms or us", md.Name, md.Value)
			}
			m.scale = to / from
		}
		dir := md.Direction
		if dir == "" {
			dir = vk.direction
		}
		switch dir {
		case "lower":
			m.Direction = stats.LowerIsBetter
		case "higher":
			m.Direction = stats.HigherIsBetter
		case "":
			return errAt(path, "metric %q: say which direction is better: direction: lower or direction: higher", md.Name)
		default:
			return errAt(path+".direction", "metric %q: direction %q: use lower or higher (is better)", md.Name, dir)
		}
		s.metrics = append(s.metrics, m)
	}
	return nil
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

// templateData merges scenario variables, the point's values and the
// runtime variables, later ones winning.
func (s *Scenario) templateData(pt Point, runtime map[string]string) map[string]string {
	data := make(map[string]string, len(s.vars)+len(pt.Vars)+len(runtime))
	for k, v := range s.vars {
		data[k] = v
	}
	for k, v := range pt.Vars {
		data[k] = v
	}
	for k, v := range runtime {
		data[k] = v
	}
	return data
}

// expand returns a copy of the scenario's setup and workload steps, initdb
// options and settings with every template executed for pt and runtime.
func (s *Scenario) expand(pt Point, runtime map[string]string) (*expanded, error) {
	c := *s
	c.Initdb = slices.Clone(s.Initdb)
	c.Setup = cloneSteps(s.Setup)
	c.Workload = cloneSteps(s.Workload)
	data := s.templateData(pt, runtime)
	var first error
	exec := func(path string, text *string) {
		if first != nil || !strings.Contains(*text, "{{") {
			return
		}
		tmpl, err := newTemplate(path, *text)
		if err == nil {
			var b bytes.Buffer
			if err = tmpl.Execute(&b, data); err == nil {
				*text = b.String()
				return
			}
		}
		first = fmt.Errorf("%s: %s: %w", s.where(path), path, err)
	}
	c.templates(exec)
	settings := map[string]string{}
	for k, v := range s.Settings {
		str, _ := scalarString(v)
		exec("$.settings."+k, &str)
		settings[k] = str
	}
	if first != nil {
		return nil, first
	}
	return &expanded{initdb: c.Initdb, settings: settings, setup: c.Setup, workload: c.Workload}, nil
}

type expanded struct {
	initdb   []string
	settings map[string]string
	setup    []Step
	workload []Step
}

func cloneSteps(steps []Step) []Step {
	out := make([]Step, len(steps))
	for i, st := range steps {
		out[i] = st
		if st.Pgbench != nil {
			b := *st.Pgbench
			b.Args = slices.Clone(b.Args)
			out[i].Pgbench = &b
		}
		if st.Copy != nil {
			c := *st.Copy
			out[i].Copy = &c
		}
		if st.Shell != nil {
			sh := *st.Shell
			sh.Argv = slices.Clone(sh.Argv)
			out[i].Shell = &sh
		}
	}
	return out
}
