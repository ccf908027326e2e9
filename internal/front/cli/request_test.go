package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/base/machinelock"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// linkScenarios gives a config file in dir the shipped scenarios: dir/scenarios
// links to configs/scenarios.
func linkScenarios(t *testing.T, dir string) {
	t.Helper()
	src, err := filepath.Abs("../../../configs/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(src, filepath.Join(dir, "scenarios")); err != nil {
		t.Fatal(err)
	}
}

func TestRequestParse(t *testing.T) {
	cases := []struct {
		args      []string
		req       app.BisectRequest
		state     string
		errSubstr string
	}{
		{
			args:  []string{"-s", "copy-single", "--good", "A", "--bad=B", "--post", "--state", "/x", "--reuse-samples", "--set", "rows=10"},
			req:   app.BisectRequest{Scenario: "copy-single", Good: "A", Bad: "B", Post: true, ReuseSamples: true, Set: map[string]string{"rows": "10"}},
			state: "/x",
		},
		{args: []string{"--resume", "abc123", "--db", "postgres:///x", "--max-time", "90m"}, req: app.BisectRequest{Resume: "abc123", MaxTime: 90 * time.Minute}},
		{args: []string{"--resume", "abc123", "--exhaustive"}, req: app.BisectRequest{Resume: "abc123", Exhaustive: true}},
		{args: []string{"-s", "../../../configs/scenarios/copy-single.yaml", "--good", "A"}, errSubstr: "needs -s SCENARIO, --good REV and --bad REV"},
		{args: []string{"A", "B"}, errSubstr: "unexpected argument"},
		{args: []string{"--good"}, errSubstr: "needs an argument"},
		{args: []string{"-s", "../../../configs/scenarios/copy-single.yaml", "--good", "A", "--bad", "B", "--min-effect", "5"}, errSubstr: "fraction"},
	}
	for _, c := range cases {
		req, flags, err := requestParse(&Env{Args: c.args, Stderr: &bytes.Buffer{}})
		if c.errSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), c.errSubstr) {
				t.Errorf("%q: error %v, want one mentioning %q", c.args, err, c.errSubstr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(req, c.req) || *flags.state != c.state {
			t.Errorf("%q:\n got %+v state %q err %v\nwant %+v state %q", c.args, req, *flags.state, err, c.req, c.state)
		}
	}
}

// TestRequestAndStatus queues a request through the CLI into a real
// results store and reads it back with status, text and JSON.
func TestRequestAndStatus(t *testing.T) {
	storetest.NeedServer(t)
	t.Setenv("PGBISECT_DB", "") // the private cluster in the state directory
	state := t.TempDir()
	for _, d := range []string{filepath.Dir(state), state} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		Main(context.Background(), []string{"db", "stop", "--state", state}, &bytes.Buffer{}, &bytes.Buffer{})
	})
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("pgbisect %q exited %d:\n%s", args, code, errb.String())
		}
		return out.String()
	}
	// A file is refused: the daemon may run on another machine, and runs
	// the scenario of that name from its own directory.
	var rout, rerr bytes.Buffer
	if code := Main(context.Background(), []string{"request", "bisect", "-s", "../../../configs/scenarios/copy-single.yaml", "--good", "REL_15_0", "--bad", "REL_15_1",
		"--config", "../../../configs/pgbisect.yaml", "--state", state}, &rout, &rerr); code != 2 || !strings.Contains(rerr.String(), "not a path: the bot has") {
		t.Errorf("request with a scenario file: exit %d\n%s", code, rerr.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bisect", "-s", "copy-single", "--good", "A", "--bad", "B", "--set", "rows=1;id"}, "rows is an integer"},
		{[]string{"bisect", "-s", "copy-single", "--good", "A", "--bad", "B", "--client-bin", "/tmp"}, "--client-bin names a directory"},
		{[]string{"compare", "-s", "copy-singel", "A", "B"}, "did you mean copy-single?"},
	} {
		rerr.Reset()
		args := append([]string{"request"}, append(c.args, "--config", "../../../configs/pgbisect.yaml", "--state", state)...)
		if code := Main(context.Background(), args, &rout, &rerr); code != 2 || !strings.Contains(rerr.String(), c.want) {
			t.Errorf("%q: exit %d\n%s\nwant %q", args, code, rerr.String(), c.want)
		}
	}
	out := run("request", "bisect", "-s", "copy-single", "--good", "REL_15_0", "--bad", "REL_15_1", "--metric", "copy_time",
		"--config", "../../../configs/pgbisect.yaml", "--state", state)
	if !strings.Contains(out, "queued job 1 for machine class default") {
		t.Fatalf("request said %q", out)
	}
	out = run("status", "--state", state)
	for _, want := range []string{"machines: none joined", "this machine: idle", "bisect  default  available", "--metric copy_time"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	// The machine lock, held by this process, shows in status.
	unlock, err := machinelock.Lock(context.Background(), machinelock.Path(state), false)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	var rep statusReport
	if err := json.Unmarshal([]byte(run("status", "--state", state, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Machine == nil || rep.Machine.PID != os.Getpid() || len(rep.Jobs) != 1 || rep.Jobs[0].State != "available" {
		t.Fatalf("status --json: %+v", rep)
	}
	r, err := jobRequest(rep.Jobs[0])
	if req, ok := r.(app.BisectRequest); err != nil || !ok || req.Scenario != "copy-single" || req.Metric != "copy_time" {
		t.Fatalf("queued request %s: a bisect request naming its scenario (%v)", rep.Jobs[0].Args, err)
	}
}

// TestLegacyJobRequest: a job an older 'pgbisect request' queued as the
// command line of 'pgbisect bisect' is read as the request that command
// line asked for; one that cannot be parsed fails with what to do.
