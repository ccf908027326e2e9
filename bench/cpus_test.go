package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

func TestParseCPUSpec(t *testing.T) {
	for in, want := range map[string]CPUSpec{
		"off":                      {},
		"server=1,client=0":        {Server: "1", Client: "0"},
		"client=0,server=2-3":      {Server: "2-3", Client: "0"},
		"server=0,2,client=1,3-4":  {Server: "0,2", Client: "1,3-4"},
		"server=5-7,client=0,1,10": {Server: "5-7", Client: "0,1,10"},
	} {
		got, err := ParseCPUSpec(in)
		if err != nil || got != want {
			t.Errorf("ParseCPUSpec(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"":                    "want server=LIST,client=LIST",
		"1,0":                 "want server=LIST,client=LIST",
		"server=1":            "give both server= and client=",
		"server=1,cpu=0":      "want server=LIST,client=LIST",
		"server=x,client=0":   `CPU list "x"`,
		"server=3-1,client=0": `CPU list "3-1"`,
		"server=1,client=":    "give both",
		"server=1,client=-1":  `CPU list "-1"`,
	} {
		if _, err := ParseCPUSpec(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseCPUSpec(%q): %v, want an error with %q", in, err, msg)
		}
	}
	s, err := parseCPUList("0,2-4,7,8")
	if err != nil || s.list() != "0,2-4,7-8" {
		t.Errorf("parseCPUList: %q, %v", s.list(), err)
	}
}

func TestScenarioCPUs(t *testing.T) {
	const base = "workload:\n  - {name: q, sql: SELECT 1}\nmetrics:\n  - {name: t, step: q, value: elapsed}\n"
	sc, err := Load([]byte(base+"cpus: {server: \"1\", client: \"0\"}\n"), "pinned.yaml", nil)
	if err != nil || sc.CPUs != (CPUSpec{Server: "1", Client: "0"}) {
		t.Fatalf("cpus section: %+v, %v", sc.CPUs, err)
	}
	for yaml, msg := range map[string]string{
		"cpus: {server: \"1\"}\n":                 "give both server and client",
		"cpus: {server: \"a\", client: \"0\"}\n":  `bad.yaml:5: CPU list "a"`,
		"cpus: {server: \"1\", clients: \"0\"}\n": "clients",
	} {
		if _, err := Load([]byte(base+yaml), "bad.yaml", nil); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want an error with %q", yaml, err, msg)
		}
	}
}

// TestPinnedSample runs a real sample pinned to two CPUs and reads, from
// /proc/PID/status, where its processes may run: the backend that serves
// the workload (it reads its own status through the server), the
// postmaster (recorded in the sample), a client the sample starts (a
// shell step reads its own) and, afterwards, every thread of pgbisect,
// which must have its CPUs back.
func TestPinnedSample(t *testing.T) {
	bin := pgBin(t)
	mine, err := getAffinity(0)
	if err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for cpu := range len(mine) * 64 {
		if mine.has(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	if len(cpus) < 2 {
		citest.Unavailable(t, "pinning needs 2 CPUs, this process may use %s", mine.list())
	}
	client, server := cpus[0], cpus[len(cpus)-1]
	scenario := fmt.Sprintf(`name: pinned
lifecycle: restart
cpus: {server: "%d", client: "%d"}
workload:
  - name: backend
    sql: SELECT (regexp_match(pg_read_file('/proc/self/status'), 'Cpus_allowed_list:\s*(\S+)'))[1]
  - name: client
    shell:
      script: awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status
metrics:
  - {name: backend_cpus, step: backend, value: scalar, direction: lower}
  - {name: client_cpus, step: client, value: scalar, direction: lower}
`, server, client)
	sc, err := Load([]byte(scenario), "pinned.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := newTestRunner(t)
	ctx := context.Background()
	defer r.Close(ctx)
	for i := range 2 { // the first sample starts the server in its setup, the second restarts it
		s, err := r.Run(ctx, sc, Target{Name: "pg", BinDir: bin}, Point{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Values["backend_cpus"] != float64(server) || s.Values["client_cpus"] != float64(client) {
			t.Errorf("sample %d: the backend may run on CPU %v and the client on %v, want %d and %d",
				i+1, s.Values["backend_cpus"], s.Values["client_cpus"], server, client)
		}
		want := Placement{Server: fmt.Sprint(server), Client: fmt.Sprint(client)}
		if s.Env.CPUs == nil || *s.Env.CPUs != want {
			t.Errorf("sample %d: placement %+v, want %+v", i+1, s.Env.CPUs, want)
		}
		if !strings.Contains(s.Env.String(), fmt.Sprintf("server on CPUs %d", server)) {
			t.Errorf("sample %d: environment %q does not say where the server ran", i+1, s.Env)
		}
		for _, tid := range tasks() {
			if got, err := getAffinity(tid); err == nil && got != mine {
				t.Errorf("sample %d: pgbisect's thread %d kept CPUs %s, want %s back", i+1, tid, got.list(), mine.list())
			}
		}
	}

	// A CPU this process may not use is refused before anything starts.
	sc.CPUs = CPUSpec{Server: "1000", Client: fmt.Sprint(client)}
	if _, err := r.Run(ctx, sc, Target{Name: "pg", BinDir: bin}, Point{}); err == nil ||
		!strings.Contains(err.Error(), "server CPUs 1000 are not all available: this machine lets pgbisect use CPUs "+mine.list()) {
		t.Errorf("a CPU not available: %v", err)
	}
}
