package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// TestSystemdUnitVerifies runs systemd-analyze verify on the shipped unit,
// with ExecStart pointing at an executable that exists here (verify checks
// that), and checks that stopping sends SIGTERM to pgbisect alone.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze := citest.Tool(t, "systemd-analyze", "apt-get install systemd")
	data, err := os.ReadFile("../../../configs/pgbisect-daemon.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	for _, want := range []string{"KillSignal=SIGTERM", "KillMode=mixed", "ExecStart=/usr/local/bin/pgbisect daemon "} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q", want)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit = strings.Replace(unit, "ExecStart=/usr/local/bin/pgbisect", "ExecStart="+exe, 1)
	path := filepath.Join(t.TempDir(), "pgbisect-daemon.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), "pgbisect-daemon.service") {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
