package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/internal/base/strictyaml"
)

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
	if err := yamlSafely(func() error {
		if err := yaml.UnmarshalWithOptions(data, s, yaml.DisallowUnknownField()); err != nil {
			return positioned(data, err)
		}
		return nil
	}); err != nil {
		return nil, strictyaml.Error(name, err, knownKeys)
	}
	s.File = name
	var f *ast.File
	if err := yamlSafely(func() (err error) { f, err = parser.ParseBytes(data, 0); return err }); err != nil {
		return nil, strictyaml.Error(name, err, knownKeys)
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

// yamlSafely runs a go-yaml call and turns a panic of it into an error:
// go-yaml v1.19.2 dereferences nil on some malformed files (a tag without
// a value where a list belongs: "metrics: ! 0", found by FuzzLoad).
func yamlSafely(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the YAML parser could not read this file (%v): check its syntax, tags (!) and anchors (&, *) first", r)
		}
	}()
	return fn()
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
var knownKeys = []string{"name", "description", "variables", "initdb", "settings", "settings_by_version", "lifecycle",

	"drop_caches", "warmup", "cluster_warmup", "timeouts", "start", "setup", "workload", "matrix", "metrics",
	"timeout", "sql", "pgbench", "copy", "explain", "shell", "args", "script", "table", "file",
	"options", "where", "client", "argv", "step", "value", "unit", "direction", "stats", "alpha",
	"confidence", "min_effect", "start_samples", "batch", "max_samples", "max_time", "wait_event",
	"interval", "record", "os", "readahead_kb", "scheduler", "vm", "between", "counter"}

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
	case Warm:
		if s.DropCaches {
			return errAt("$.drop_caches", "drop_caches restarts the server before every sample, which lifecycle warm keeps running: use lifecycle restart, or drop_caches on the workload steps that should read cold")
		}
		if len(s.Between) == 0 {
			s.Between = []Step{{Name: "checkpoint", SQL: "CHECKPOINT"}}
		}
	default:
		return errAt("$.lifecycle", "lifecycle %q: use fresh (initdb for every sample), restart (one cluster, restarted for every sample) or warm (one running server, a checkpoint between samples)", s.Lifecycle)
	}
	switch s.Counter {
	case "":
		s.Counter = CounterAuto
	case CounterAuto, CounterPerf, CounterValgrind:
	default:
		return errAt("$.counter", "counter %q: use auto (perf where the machine has hardware counters, else valgrind), perf or valgrind", s.Counter)
	}
	if len(s.Between) > 0 && s.Lifecycle != Warm {
		return errAt("$.between", "between steps run on a warm server between samples: set lifecycle: warm, or move them into the workload")
	}
	if a := s.Stats.Alpha; a < 0 || a >= 0.5 {
		return errAt("$.stats.alpha", "alpha %g is out of range: use a small probability such as 0.01", a)
	}
	if m := s.Stats.MinEffect; m < 0 || m >= 1 {
		return errAt("$.stats.min_effect", "min_effect %g is a fraction: 0.05 means 5%%", m)
	}
	if c := s.Stats.Confidence; c < 0 || c >= 1 {
		return errAt("$.stats.confidence", "confidence %g is out of range: use e.g. 0.95", c)
	}
	if s.Stats.StartSamples < 0 || s.Stats.Batch < 0 || s.Stats.MaxSamples < 0 {
		return errAt("$.stats", "start_samples, batch and max_samples must be 0 (the default) or more")
	}
	if err := s.OS.validate(); err != nil {
		return err
	}
	if err := s.CPUs.validate(); err != nil {
		return err
	}
	if s.Warmup < 0 {
		return errAt("$.warmup", "warmup must be 0 or more runs")
	}
	if s.ClusterWarmup < 0 {
		return errAt("$.cluster_warmup", "cluster_warmup must be 0 or more runs")
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
	}{{"setup", s.Setup}, {"between", s.Between}, {"workload", s.Workload}} {
		for i := range ph.steps {
			st := &ph.steps[i]
			path := fmt.Sprintf("$.%s[%d]", ph.name, i)
			if err := validateStep(st, path); err != nil {
				return err
			}
			if st.DropCaches && ph.name != "workload" {
				return errAt(path+".drop_caches", "drop_caches applies to workload steps only (setup steps are not measured; the scenario-level drop_caches drops the caches after the setup)")
			}
			if ph.name == "workload" {
				if _, dup := steps[st.Name]; dup {
					return errAt(path, "two workload steps are named %q: give each a distinct name", st.Name)
				}
				steps[st.Name] = st
			}
		}
	}
	if err := s.validateByVersion(); err != nil {
		return err
	}
	if err := s.validateVersions(); err != nil {
		return err
	}
	if err := s.validateTemplates(); err != nil {
		return err
	}
	return s.validateMetrics(steps)
}

func (s *Scenario) validateVars(overrides map[string]string) error {
	s.vars = map[string]string{}
	s.kinds = map[string]varKind{}
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
		s.kinds[k] = kindOf(v)
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
			if i == 0 {
				s.kinds[k] = kindOf(v)
			} else {
				s.kinds[k] = s.kinds[k].join(kindOf(v))
			}
		}
		s.axes = append(s.axes, ax)
	}
	names := s.varNames()
	var err error
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := overrides[k]
		if i := slices.IndexFunc(s.axes, func(a axis) bool { return a.name == k }); i >= 0 {
			values := strings.Split(v, ",")
			for j, x := range values {
				if values[j], err = s.kinds[k].check(k, x); err != nil {
					return err
				}
			}
			s.axes[i].values = values
			continue
		}
		if _, ok := s.vars[k]; !ok {
			msg := fmt.Sprintf("--set %s: the scenario has no variable %q", k, k)
			if c := strictyaml.Closest(k, names); c != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", c)
			} else {
				msg += fmt.Sprintf(" (it has: %s)", strings.Join(names, ", "))
			}
			return errors.New(msg)
		}
		if s.vars[k], err = s.kinds[k].check(k, v); err != nil {
			return err
		}
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

func (s *Scenario) validateMetrics(steps map[string]*Step) error {
	if len(s.Metrics) == 0 {
		return errAt("$", "no metrics: add a metrics list (for example the elapsed time of a workload step)")
	}
	stepNames := make([]string, 0, len(steps))
	for n := range steps {
		stepNames = append(stepNames, n)
	}
	sort.Strings(stepNames)
	valueNames := serverValueNames()
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
			if c := strictyaml.Closest(md.Step, stepNames); c != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", c)
			} else {
				msg += fmt.Sprintf(" (workload steps: %s)", strings.Join(stepNames, ", "))
			}
			return errAt(path+".step", "%s", msg)
		}
		vk, ok := valueKinds[md.Value]
		if sv, server := serverValues[md.Value]; server {
			vk, ok = valueKind{kinds: stepKinds, unit: sv.unit, direction: "lower"}, true
		}
		if !ok {
			msg := fmt.Sprintf("metric %q: unknown value %q", md.Name, md.Value)
			if c := strictyaml.Closest(md.Value, valueNames); c != "" {
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
		if md.MinEffect < 0 || md.MinEffect >= 1 {
			return errAt(path+".min_effect", "metric %q: min_effect %g is a fraction: 0.05 means 5%%", md.Name, md.MinEffect)
		}
		if md.Value != "wait_events" && (md.WaitEvent != "" || md.Interval != 0) {
			return errAt(path, "metric %q: wait_event and interval belong to value: wait_events", md.Name)
		}
		if md.Interval < 0 || (md.Interval > 0 && md.Interval < time.Millisecond) {
			return errAt(path+".interval", "metric %q: interval %s: sample at most every millisecond (e.g. 10ms)", md.Name, md.Interval)
		}
		m := Metric{Name: md.Name, Step: md.Step, Value: md.Value, Unit: md.Unit, MinEffect: md.MinEffect, WaitEvent: md.WaitEvent, Interval: md.Interval, Record: md.Record, scale: 1}
		if m.Value == "wait_events" && m.Interval == 0 {
			m.Interval = defaultWaitInterval
		}
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
