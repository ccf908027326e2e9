package bench

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/pgbisect/pgbisect/internal/base/pgcluster"

	"github.com/pgbisect/pgbisect/internal/base/strictyaml"
)

// templates lists every templated string of the scenario with its YAML
// path, so validation and expansion walk the same fields.
func (s *Scenario) templates(visit func(path string, text *string)) {
	for i := range s.Initdb {
		visit(fmt.Sprintf("$.initdb[%d]", i), &s.Initdb[i])
	}
	for _, ph := range []struct {
		name  string
		steps []Step
	}{{"setup", s.Setup}, {"between", s.Between}, {"workload", s.Workload}} {
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
	if i, msg := checkInitdb(s.Initdb); msg != "" {
		return errAt(fmt.Sprintf("$.initdb[%d]", i), "%s", msg)
	}
	for k, v := range s.Settings {
		if err := pgcluster.CheckSettings(map[string]string{k: ""}); err != nil {
			return errAt("$.settings."+k, "%v", err)
		}
		str, err := scalarString(v)
		if err != nil {
			return errAt("$.settings."+k, "setting %q: %v", k, err)
		}
		if err := checkSettingValue(k, str); err != nil {
			return errAt("$.settings."+k, "%v", err)
		}
		check("$.settings."+k, str)
	}
	for _, sec := range s.byVer {
		for k, v := range sec.values {
			if err := pgcluster.CheckSettings(map[string]string{k: ""}); err != nil {
				return errAt(sec.path+"."+k, "%v", err)
			}
			if v != nil {
				if err := checkSettingValue(k, *v); err != nil {
					return errAt(sec.path+"."+k, "%v", err)
				}
				check(sec.path+"."+k, *v)
			}
		}
	}
	return first
}

// checkInitdb finds the first initdb option that would change the
// cluster's authentication, superuser, data directory or input files,
// which pgcluster sets (a later -A trust would undo them), or set a
// reserved server setting (-c/--set NAME=VALUE, initdb 16 on). It returns
// the option's index and why, or "" when every option may be given.
func checkInitdb(opts []string) (int, string) {
	for i, opt := range opts {
		name, val, _ := strings.Cut(strings.TrimSpace(opt), "=")
		for _, p := range []string{"-A", "--auth", "-U", "--username", "--pwfile", "-W", "--pwprompt", "-D", "--pgdata", "-L"} {
			if name == p || (len(p) == 2 && strings.HasPrefix(name, p)) || strings.HasPrefix(name, "--auth") {
				return i, fmt.Sprintf("initdb option %q sets who may connect, which is pgbisect's own: remove it", opt)
			}
		}
		var setting string
		switch {
		case name == "-c" || name == "--set":
			if val != "" { // --set=NAME=VALUE
				setting = val
			} else if i+1 < len(opts) {
				setting = opts[i+1]
			}
		case strings.HasPrefix(name, "-c"):
			setting = strings.TrimPrefix(strings.TrimSpace(opt), "-c")
		default:
			continue
		}
		key, _, _ := strings.Cut(setting, "=")
		if err := pgcluster.CheckSettings(map[string]string{key: ""}); err != nil {
			return i, fmt.Sprintf("initdb option %q: %v", opt, err)
		}
	}
	return 0, ""
}

// checkSettingValue refuses a setting value that would end its line in
// postgresql.conf and start another (a newline or another control
// character): every line pgbisect writes holds one setting.
func checkSettingValue(name, v string) error {
	if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("setting %s: its value holds a line break or another control character: give one line", name)
	}
	return nil
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
		if c := strictyaml.Closest(key, names); c != "" {
			out += fmt.Sprintf(" (did you mean %q?)", c)
		}
		return out
	}
	if i := strings.Index(msg, "error calling "); i >= 0 {
		return "template: " + msg[i:]
	}
	return "template: " + cleanTemplateError(err)
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
	c.Between = cloneSteps(s.Between)
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
	var byVersion []versionSection
	for _, sec := range s.byVer {
		vs := versionSection{constraint: sec.constraint, where: s.where(sec.path), settings: map[string]*string{}}
		for k, v := range sec.values {
			if v != nil {
				str := *v
				exec(sec.path+"."+k, &str)
				v = &str
			}
			vs.settings[k] = v
		}
		byVersion = append(byVersion, vs)
	}
	if first != nil {
		return nil, first
	}
	// Checked again with the variables in: no value set for a variable
	// (--set, a request) makes a reserved initdb option or a setting that
	// spans lines.
	if i, msg := checkInitdb(c.Initdb); msg != "" {
		return nil, fmt.Errorf("%s: %s", s.where(fmt.Sprintf("$.initdb[%d]", i)), msg)
	}
	for k, v := range settings {
		if err := checkSettingValue(k, v); err != nil {
			return nil, fmt.Errorf("%s: %w", s.where("$.settings."+k), err)
		}
	}
	for _, vs := range byVersion {
		for k, v := range vs.settings {
			if v == nil {
				continue
			}
			if err := checkSettingValue(k, *v); err != nil {
				return nil, fmt.Errorf("%s: %w", vs.where, err)
			}
		}
	}
	return &expanded{initdb: c.Initdb, settings: settings, byVersion: byVersion, setup: c.Setup, between: c.Between, workload: c.Workload}, nil
}

type expanded struct {
	initdb    []string
	settings  map[string]string
	byVersion []versionSection // settings_by_version, applied per server
	setup     []Step
	between   []Step // before each sample on a warm server
	workload  []Step
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

// SettingsAt returns the server settings the scenario writes at pt, with
// its variables and the point's values expanded, as reports show them
// ("shared_buffers: 1GB", not "{{.shared_buffers}}"). The runtime
// variables of a cluster (datadir, port...) are not known outside a run and
// stay as written.
func (s *Scenario) SettingsAt(pt Point) (map[string]string, error) {
	runtime := make(map[string]string, len(runtimeVars))
	for _, name := range runtimeVars {
		runtime[name] = "{{." + name + "}}"
	}
	e, err := s.expand(pt, runtime)
	if err != nil {
		return nil, err
	}
	return e.settings, nil
}
