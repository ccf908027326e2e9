package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/base/pgsrc"
	"github.com/pgbisect/pgbisect/internal/base/pgsrc/pgsrctest"
)

const runScenario = "../../../configs/scenarios/copy-single.yaml"

func runMainArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), append([]string{"run"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// runPG15 returns Debian's PostgreSQL 15 bin directory.
func runPG15(t *testing.T) string { return pgsrctest.DebianBin(t) }

// runState is a state directory the server's user can reach.
func runState(t *testing.T) string { return pgsrctest.ServerDir(t) }

func TestRunUsage(t *testing.T) {
	state := t.TempDir()
	for _, tt := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--bindir", "/x"}, 2, "-s SCENARIO is required"},
		{[]string{"-s", runScenario}, 2, "give one REV to build, or --bindir DIR"},
		{[]string{"-s", runScenario, "REV", "--bindir", "/x"}, 2, "give one REV to build, or --bindir DIR"},
		{[]string{"-s", runScenario, "--bindir", "/x", "--samples", "0"}, 2, "--samples must be 1 or more"},
		{[]string{"-s", runScenario, "--bindir", "/x", "--set", "rows"}, 2, "want variable=value"},
		{[]string{"-s", runScenario, "--bindir", "/x", "--set", "rwos=3", "--state", state}, 1,
			`copy-single.yaml: --set rwos: the scenario has no variable "rwos" (did you mean "rows"?)`},
		{[]string{"-s", runScenario, "--bindir", "/x", "--point", "clients=1", "--state", state}, 2,
			`scenario copy-single has no point "clients=1"`},
		{[]string{"-s", runScenario, "--bindir", "/x", "--cpus", "server=1", "--state", state}, 2,
			`--cpus: cpus "server=1": give both server= and client= (e.g. server=1,client=0), or off`},
		{[]string{"-s", runScenario, "--bindir", "/nonexistent/bin", "--state", state}, 1,
			"/nonexistent/bin has no initdb: give the bin directory of a PostgreSQL installation"},
	} {
		code, _, errs := runMainArgs(t, tt.args...)
		if code != tt.code || !strings.Contains(errs, tt.err) {
			t.Errorf("run %q: exit %d, stderr %q; want exit %d and %q", tt.args, code, errs, tt.code, tt.err)
		}
	}
}

// TestRunBindir runs copy-single at a tiny size against Debian's
// PostgreSQL 15 and checks the table, the progress and the JSON output.
func TestRunBindir(t *testing.T) {
	bin := runPG15(t)
	state := runState(t)
	code, out, errs := runMainArgs(t, "-s", runScenario, "--bindir", bin, "--samples", "2", "--set", "rows=5000", "--state", state)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	for _, want := range []string{"scenario copy-single, target 15 (" + bin + "), 2 samples per point",
		"point", "metric", "median", "%stddev", "better", "copy_time", "parse_time", "5000", "rows  higher", "server 15."} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"copy-single: sample 2/2 (2/2 overall", "workload 2/3: copy (copy)", "copy done in"} {
		if !strings.Contains(errs, want) {
			t.Errorf("progress lacks %q:\n%s", want, errs)
		}
	}

	code, out, errs = runMainArgs(t, "-s", runScenario, "--bindir", bin, "--samples", "1", "--set", "rows=3000", "--state", state, "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d\n%s", code, errs)
	}
	var res runResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	if len(res.Points) != 1 || len(res.Points[0].Samples) != 1 || res.Vars["rows"] != "3000" {
		t.Fatalf("json: %+v", res)
	}
	for _, m := range res.Points[0].Metrics {
		if m.Name == "rows" && (m.Summary.Median != 3000 || m.Better != "higher" || m.Unit != "rows") {
			t.Errorf("rows metric %+v", m)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(state, "clusters")); len(entries) != 0 {
		t.Errorf("clusters left behind: %v", entries)
	}
}

// TestRunBuildsRev measures a revision of the fixture repository: the
// build is the one shared by every end-to-end test (a cache hit once any
// of them has built it).
func TestRunBuildsRev(t *testing.T) {
	_, base := pgsrctest.Require(t)
	state, err := pgsrctest.StateDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pg.git")
	if _, err := pgsrc.NewRepo(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runMainArgs(t, "-s", runScenario, base[:12], "--repo", dir, "--state", state,
		"--samples", "1", "--set", "rows=2000")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if want := "target " + base[:10] + " (" + filepath.Join(state, "builds"); !strings.Contains(out, want) || !strings.Contains(out, "copy_time") {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
