package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// TestScenarioFilesLoad loads every shipped scenario: each must validate,
// name the thread it reproduces and have a description and metrics.
func TestScenarioFilesLoad(t *testing.T) {
	files, err := filepath.Glob("../configs/scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"checkpointer-walwriter-pgbench", "clog-unlogged-pgbench", "copy-concurrent",
		"copy-single-instructions", "copy-single", "parallel-copy-flush-after", "parallel-seqscan-instructions", "parallel-seqscan"}
	var names []string
	for _, f := range files {
		sc, err := LoadFile(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		names = append(names, sc.Name)
		if base := strings.TrimSuffix(filepath.Base(f), ".yaml"); sc.Name != base {
			t.Errorf("%s: name %q differs from the file name", f, sc.Name)
		}
		data, _ := os.ReadFile(f)
		if !strings.HasPrefix(string(data), "# Reproduces") || !strings.Contains(string(data), "thread") {
			t.Errorf("%s: must open with a comment naming the thread it reproduces", f)
		}
		// The header gives the command that bisects its culprit upstream.
		if cmd := "pgbisect bisect -s configs/scenarios/" + filepath.Base(f); !strings.Contains(string(data), cmd) ||
			!strings.Contains(string(data), "--good ") || !strings.Contains(string(data), "--bad ") {
			t.Errorf("%s: header must give the bisect command (%s ... --good X --bad Y)", f, cmd)
		}
		if sc.Description == "" || len(sc.MetricSpecs()) == 0 || len(sc.Points()) == 0 {
			t.Errorf("%s: needs a description, metrics and at least one point", f)
		}
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("scenarios %v, want %v", names, want)
	}
}

const baseScenario = `name: x
variables:
  rows: 10
  scale: 1
workload:
  - name: load
    sql: SELECT {{.rows}}
metrics:
  - name: load_time
    step: load
    value: elapsed
`

// TestMalformedScenarios checks the exact error, with its line and hint,
// for each kind of mistake.
func TestMalformedScenarios(t *testing.T) {
	cases := []struct {
		name, yaml string
		overrides  map[string]string
		want       string
	}{
		{"unknown key", "workloads: []\n" + baseScenario, nil,
			`x.yaml:1: unknown key "workloads" (did you mean "workload"?)`},
		{"unknown step kind", "name: x\nworkload:\n  - name: a\n    pgbnch: {args: [-n]}\n", nil,
			`x.yaml:4: unknown key "pgbnch" (did you mean "pgbench"?)`},
		{"unknown nested key", "name: x\nworkload:\n  - copy: {table: t, file: f, optons: x}\n", nil,
			`x.yaml:3: unknown key "optons" (did you mean "options"?)`},
		{"wrong type", "warmup: lots\n" + baseScenario, nil,
			`x.yaml:1: cannot unmarshal string into Go struct field Scenario.Warmup of type int`},
		{"bad duration", "timeouts:\n  setup: soon\n" + baseScenario, nil,
			`x.yaml:2: invalid duration "soon"`},
		{"not a list", "name: x\nworkload: {sql: x}\n", nil,
			`x.yaml:2: mapping was used where sequence is expected`},
		{"bad lifecycle", "lifecycle: reboot\n" + baseScenario, nil,
			`x.yaml:1: lifecycle "reboot": use fresh (initdb for every sample), restart (one cluster, restarted for every sample) or warm (one running server, a checkpoint between samples)`},
		{"bad template", strings.Replace(baseScenario, "SELECT {{.rows}}", "SELECT {{.rows", 1), nil,
			`x.yaml:7: bad template: unclosed action`},
		{"unknown template variable", strings.Replace(baseScenario, "{{.rows}}", "{{.row}}", 1), nil,
			`x.yaml:7: unknown variable "row" in template (did you mean "rows"?)`},
		{"bad template function argument", strings.Replace(baseScenario, "{{.rows}}", "{{mul .rows \"x\"}}", 1), nil,
			`x.yaml:7: template: error calling mul: "x" is not an integer`},
		{"no kind", "name: x\nworkload:\n  - name: a\nmetrics: []\n", nil,
			`x.yaml:3: step has no kind: give it one of sql, pgbench, copy, explain, shell`},
		{"two kinds", "name: x\nworkload:\n  - name: a\n    sql: SELECT 1\n    explain: SELECT 1\n", nil,
			`x.yaml:3: step has several kinds (sql, explain): split it into one step per kind`},
		{"shell argv and script", "name: x\nworkload:\n  - shell:\n      argv: [true]\n      script: \"true\"\n", nil,
			`x.yaml:4: shell needs exactly one of argv (a command and its arguments) or script (run by /bin/sh -c)`},
		{"drop_caches in setup", "name: x\nsetup:\n  - sql: SELECT 1\n    drop_caches: true\n" + strings.TrimPrefix(baseScenario, "name: x\n"), nil,
			`x.yaml:4: drop_caches applies to workload steps only (setup steps are not measured; the scenario-level drop_caches drops the caches after the setup)`},
		{"drop_caches not a boolean", strings.Replace(baseScenario, "    sql: SELECT {{.rows}}", "    sql: SELECT {{.rows}}\n    drop_caches: yes please", 1), nil,
			`x.yaml:8: cannot unmarshal string into Go struct field Scenario.Workload of type bool`},
		{"copy without file", "name: x\nworkload:\n  - copy:\n      table: t\n", nil,
			`x.yaml:4: copy needs a file (one the setup generated, e.g. {{.workdir}}/data.txt)`},
		{"duplicate step", strings.Replace(baseScenario, "metrics:", "  - name: load\n    sql: SELECT 2\nmetrics:", 1), nil,
			`x.yaml:8: two workload steps are named "load": give each a distinct name`},
		{"stats typo", "stats:\n  min_efect: 0.05\n" + baseScenario, nil,
			`x.yaml:2: unknown key "min_efect" (did you mean "min_effect"?)`},
		{"stats min_effect as percent", "stats:\n  min_effect: 5\n" + baseScenario, nil,
			`x.yaml:2: min_effect 5 is a fraction: 0.05 means 5%`},
		{"no workload", "name: x\n", nil,
			`x.yaml: no workload steps: add a workload list with at least one step`},
		{"no metrics", "name: x\nworkload:\n  - sql: SELECT 1\n", nil,
			`x.yaml: no metrics: add a metrics list (for example the elapsed time of a workload step)`},
		{"metric step typo", strings.Replace(baseScenario, "step: load", "step: lod", 1), nil,
			`x.yaml:10: metric "load_time": no workload step named "lod" (did you mean "load"?)`},
		{"metric value typo", strings.Replace(baseScenario, "value: elapsed", "value: elapsd", 1), nil,
			`x.yaml:11: metric "load_time": unknown value "elapsd" (did you mean "elapsed"?)`},
		{"value of another kind", strings.Replace(baseScenario, "value: elapsed", "value: tps", 1), nil,
			`x.yaml:11: metric "load_time": a sql step has no "tps" value ("tps" comes from pgbench steps)`},
		{"scalar without direction", strings.Replace(baseScenario, "value: elapsed", "value: scalar", 1), nil,
			`x.yaml:9: metric "load_time": say which direction is better: direction: lower or direction: higher`},
		{"bad direction", baseScenario + "    direction: down\n", nil,
			`x.yaml:12: metric "load_time": direction "down": use lower or higher (is better)`},
		{"time in bytes", baseScenario + "    unit: bytes\n", nil,
			`x.yaml:12: metric "load_time": elapsed is a time: use unit s, ms or us`},
		{"matrix not a list", "matrix:\n  clients: 4\n" + baseScenario, nil,
			`x.yaml:2: matrix "clients" must be a non-empty list of values, like [1, 2, 4]`},
		{"runtime variable", "matrix:\n  workdir: [a]\n" + baseScenario, nil,
			`x.yaml:2: matrix variable "workdir" is set by the runner: choose another name`},
		{"listen_addresses", "settings:\n  work_mem: 4MB\n  listen_addresses: '*'\n" + baseScenario, nil,
			`x.yaml:3: setting listen_addresses is pgbisect's own (where the server listens): remove it from the scenario`},
		{"socket permissions by version", "settings_by_version:\n  '>=10':\n    unix_socket_permissions: '0777'\n" + baseScenario, nil,
			`x.yaml:3: setting unix_socket_permissions is pgbisect's own (where the server listens): remove it from the scenario`},
		{"initdb trust", "initdb: [--data-checksums, -A, trust]\n" + baseScenario, nil,
			`x.yaml:1: initdb option "-A" sets who may connect, which is pgbisect's own: remove it`},
		{"go-yaml panics", "settings:\nworkload:\n -  sql: 0\nmetrics: ! 0", nil, // found by FuzzLoad
			`x.yaml: the YAML parser could not read this file (runtime error: invalid memory address or nil pointer dereference): check its syntax, tags (!) and anchors (&, *) first`},
		{"unknown override", baseScenario, map[string]string{"sclae": "3"},
			`x.yaml: --set sclae: the scenario has no variable "sclae" (did you mean "scale"?)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load([]byte(c.yaml), "x.yaml", c.overrides)
			if err == nil {
				t.Fatalf("loaded without error, want %q", c.want)
			}
			if err.Error() != c.want {
				t.Errorf("error\n  %s\nwant\n  %s", err, c.want)
			}
		})
	}
}

func TestPointsAndOverrides(t *testing.T) {
	y := "matrix:\n  clients: [1, 4]\n  mode: [simple, prepared]\n" + baseScenario
	sc, err := Load([]byte(y), "x.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range sc.Points() {
		got = append(got, p.String())
	}
	want := []string{"clients=1,mode=simple", "clients=1,mode=prepared", "clients=4,mode=simple", "clients=4,mode=prepared"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("points %q, want %q", got, want)
	}
	sc, err = Load([]byte(y), "x.yaml", map[string]string{"clients": "16", "rows": "99"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sc.Points()); n != 2 || sc.Points()[0].Vars["clients"] != "16" || sc.Vars()["rows"] != "99" {
		t.Errorf("after overrides: points %v vars %v", sc.Points(), sc.Vars())
	}
	if _, err := sc.FindPoint("clients=16,mode=prepared"); err != nil {
		t.Error(err)
	}
	if _, err := sc.FindPoint("clients=2"); err == nil || !strings.Contains(err.Error(), "clients=16,mode=simple") {
		t.Errorf("FindPoint of a missing point: %v", err)
	}
	one, _ := Load([]byte(baseScenario), "x.yaml", nil)
	if p := one.Points(); len(p) != 1 || p[0].String() != "" {
		t.Errorf("no matrix: points %v, want one empty point", p)
	}
}

func TestMetricSpecsDefaultsAndUnits(t *testing.T) {
	y := `workload:
  - name: b
    pgbench: {args: [-T, "1"]}
  - name: q
    sql: SELECT 1
metrics:
  - {name: tps, step: b, value: tps}
  - {name: lat, step: b, value: latency_avg, unit: us}
  - {name: q_ms, step: q, value: elapsed, unit: ms}
  - {name: size, step: q, value: scalar, unit: bytes, direction: lower}
`
	sc, err := Load([]byte(y), "dir/thing.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "thing" || sc.Lifecycle != Fresh {
		t.Errorf("defaults: name %q lifecycle %q", sc.Name, sc.Lifecycle)
	}
	got := sc.MetricSpecs()
	want := []Metric{
		{Name: "tps", Unit: "tps", Direction: stats.HigherIsBetter, Step: "b", Value: "tps", scale: 1},
		{Name: "lat", Unit: "us", Direction: stats.LowerIsBetter, Step: "b", Value: "latency_avg", scale: 1000},
		{Name: "q_ms", Unit: "ms", Direction: stats.LowerIsBetter, Step: "q", Value: "elapsed", scale: 1000},
		{Name: "size", Unit: "bytes", Direction: stats.LowerIsBetter, Step: "q", Value: "scalar", scale: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("metrics\n %+v\nwant\n %+v", got, want)
	}
}

func TestExpandTemplates(t *testing.T) {
	y := `variables: {scale: 3}
matrix: {clients: [2]}
settings: {work_mem: "{{mul .scale 4}}MB"}
initdb: ["--wal-segsize={{.scale}}"]
workload:
  - name: b
    pgbench:
      args: [-c, "{{.clients}}", -s, "{{add .scale 1}}"]
      script: "\\set n {{div 10 .clients}}\nSELECT :n;"
  - name: s
    shell: {argv: [echo, "{{.workdir}}/{{sub .scale 1}}"]}
metrics:
  - {name: e, step: b, value: elapsed}
`
	sc, err := Load([]byte(y), "x.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := sc.expand(sc.Points()[0], map[string]string{"workdir": "/w"})
	if err != nil {
		t.Fatal(err)
	}
	if got := exp.workload[0].Pgbench.Args; !reflect.DeepEqual(got, []string{"-c", "2", "-s", "4"}) {
		t.Errorf("pgbench args %q", got)
	}
	if got := exp.workload[0].Pgbench.Script; got != "\\set n 5\nSELECT :n;" {
		t.Errorf("script %q", got)
	}
	if got := exp.workload[1].Shell.Argv[1]; got != "/w/2" {
		t.Errorf("shell argv %q", got)
	}
	if exp.settings["work_mem"] != "12MB" || exp.initdb[0] != "--wal-segsize=3" {
		t.Errorf("settings %v initdb %v", exp.settings, exp.initdb)
	}
	// The scenario itself keeps its templates for the next point.
	if sc.Workload[0].Pgbench.Args[1] != "{{.clients}}" {
		t.Errorf("expand modified the scenario: %q", sc.Workload[0].Pgbench.Args)
	}
}

// TestSettingsAt: reports show the settings a point really ran with, the
// scenario's variables (with --set overrides) and the point's values
// expanded; runtime variables stay as written.
func TestSettingsAt(t *testing.T) {
	y := `variables: {buffers: 128MB, scale: 3}
matrix: {clients: [2, 8]}
settings:
  shared_buffers: "{{.buffers}}"
  work_mem: "{{mul .scale 4}}MB"
  max_connections: "{{add .clients 10}}"
  log_directory: "{{.workdir}}/log"
  fsync: "off"
workload:
  - {name: b, sql: SELECT 1}
metrics:
  - {name: e, step: b, value: elapsed}
`
	sc, err := Load([]byte(y), "x.yaml", map[string]string{"buffers": "1GB"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := sc.SettingsAt(sc.Points()[1])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"shared_buffers": "1GB", "work_mem": "12MB", "max_connections": "18",
		"log_directory": "{{.workdir}}/log", "fsync": "off"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("settings at clients=8: %v, want %v", got, want)
	}
}

// TestReservedSettingsRefused: a scenario setting one of each kind of
// setting the cluster owns (where the server reads its configuration,
// where it listens, who may connect, what code it loads, what commands it
// runs) is refused at load time with the file, the line and the key, in
// settings, settings_by_version and initdb's -c; whatever the build knows.
func TestReservedSettingsRefused(t *testing.T) {
	for _, c := range []struct{ key, why string }{
		{"include_if_exists", "where the server reads its configuration"},
		{"include", "where the server reads its configuration"},
		{"include_dir", "where the server reads its configuration"},
		{"config_file", "where the server reads its configuration"},
		{"data_directory", "where the server reads its configuration"},
		{"external_pid_file", "where the server reads its configuration"},
		{"hba_file", "where the server reads its configuration"},
		{"ident_file", "where the server reads its configuration"},
		{"port", "where the server listens"},
		{"unix_socket_group", "where the server listens"},
		{"ssl_cert_file", "who may connect and how"},
		{"ssl_passphrase_command", "who may connect and how"},
		{"password_encryption", "who may connect and how"},
		{"shared_preload_libraries", "what code the server loads"},
		{"local_preload_libraries", "what code the server loads"},
		{"session_preload_libraries", "what code the server loads"},
		{"dynamic_library_path", "what code the server loads"},
		{"jit_provider", "what code the server loads"},
		{"archive_library", "what code the server loads"},
		{"archive_command", "what commands the server runs and where it connects"},
		{"restore_command", "what commands the server runs and where it connects"},
	} {
		want := fmt.Sprintf("setting %s is pgbisect's own (%s): remove it from the scenario", c.key, c.why)
		for _, y := range []struct{ name, yaml, where string }{
			{"settings", "settings:\n  work_mem: 4MB\n  " + c.key + ": /tmp/x\n", "x.yaml:3: "},
			{"by version", "settings_by_version:\n  '>=10':\n    " + c.key + ": /tmp/x\n", "x.yaml:3: "},
			{"initdb -c", "initdb: [-c, " + c.key + "=/tmp/x]\n", `x.yaml:1: initdb option "-c": `},
		} {
			_, err := Load([]byte(y.yaml+baseScenario), "x.yaml", nil)
			if err == nil || err.Error() != y.where+want {
				t.Errorf("%s %s: %v\nwant %s%s", c.key, y.name, err, y.where, want)
			}
		}
	}
	_, err := Load([]byte("settings:\n  work_mem: \"4MB'\\ninclude_if_exists = '/tmp/x\"\n"+baseScenario), "x.yaml", nil)
	if err == nil || !strings.Contains(err.Error(), "x.yaml:2: setting work_mem: its value holds a line break") {
		t.Errorf("a value with a line break: %v", err)
	}
	// A variable cannot make one either once expanded.
	sc, err := Load([]byte("initdb: [\"-c{{.opt}}=on\"]\n"+strings.Replace(baseScenario, "  scale: 1\n", "  scale: 1\n  opt: x\n", 1)), "x.yaml", map[string]string{"opt": "ssl"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.expand(sc.Points()[0], placeholderRuntime); err == nil || !strings.Contains(err.Error(), "setting ssl is pgbisect's own") {
		t.Errorf("initdb -c{{.opt}} with opt=ssl: %v", err)
	}
}

// TestOverridesTyped: a value set for a variable from outside the file
// (--set, a queued request) is of the variable's kind: an integer stays an
// integer, and text that would mean something to SQL or a shell (quotes,
// spaces, ;, $, backquotes, slashes, line breaks, a leading -) never
// reaches a step, which splices it unquoted.
func TestOverridesTyped(t *testing.T) {
	y := "matrix:\n  clients: [1, 4]\n" + strings.Replace(baseScenario, "  scale: 1\n", "  scale: 1\n  ratio: 0.5\n  on: true\n  label: abc\n", 1)
	y = strings.Replace(y, "    sql: SELECT {{.rows}}\n", "    sql: SELECT '{{.label}}', {{.rows}}, {{.ratio}}, {{.on}}\n  - name: sh\n    shell:\n      script: echo {{.label}} {{.clients}}\n", 1)
	for _, c := range []struct {
		set  map[string]string
		want string // "" loads
	}{
		{map[string]string{"rows": "100", "ratio": "1e3", "on": "false", "label": "UNLOGGED", "clients": "1,2,8"}, ""},
		{map[string]string{"label": ""}, ""},
		{map[string]string{"rows": "1; DROP TABLE t"}, `--set rows="1; DROP TABLE t": rows is an integer in the scenario`},
		{map[string]string{"rows": "0x10"}, "rows is an integer"},
		{map[string]string{"ratio": "NaN"}, "ratio is a number"},
		{map[string]string{"on": "yes please"}, "on is true or false"},
		{map[string]string{"clients": "1,4;id"}, "clients is an integer"},
		{map[string]string{"label": "x'; DROP TABLE t; --"}, "a value set for a variable is a word"},
		{map[string]string{"label": "$(id)"}, "a value set for a variable is a word"},
		{map[string]string{"label": "`id`"}, "a value set for a variable is a word"},
		{map[string]string{"label": "a b"}, "a value set for a variable is a word"},
		{map[string]string{"label": "/etc/shadow"}, "a value set for a variable is a word"},
		{map[string]string{"label": "-f"}, "a value set for a variable is a word"},
		{map[string]string{"label": "a\nb"}, "a value set for a variable is a word"},
	} {
		sc, err := Load([]byte(y), "x.yaml", c.set)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.set, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v, want %q", c.set, err, c.want)
		case c.want == "" && c.set["rows"] == "100":
			e, err := sc.expand(sc.Points()[0], placeholderRuntime)
			if err != nil || e.workload[0].SQL != "SELECT 'UNLOGGED', 100, 1e3, false" {
				t.Errorf("expanded %q, %v", e.workload[0].SQL, err)
			}
		}
	}
}
