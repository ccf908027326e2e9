package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/front/config"
)

// TestConfigCommand: 'pgbisect config' prints where the config came from
// and every key, the flags applied, the db URL's password redacted, and
// its output loads as a config file again.
func TestConfigCommand(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(file, []byte("branch: REL_17_STABLE\nbuild:\n  jobs: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GITHUB_TOKEN", "ghp_secret_value")
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"config", "--config", file, "--state", dir,
		"--db", "postgres://bot:hunter2@db.example/results", "--repo", "https://git.example.com/pg.git"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got := out.String()
	for _, want := range []string{"# config file: " + file + " (from --config)", "# GITHUB_TOKEN: set", "branch: REL_17_STABLE",
		"jobs: 3", "state_dir: " + dir, "repo: https://git.example.com/pg.git", "db.example/results", "rate_limit:", "private: false"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "hunter2") || strings.Contains(got, "ghp_secret_value") {
		t.Errorf("output shows a secret:\n%s", got)
	}
	if _, err := config.Load(out.Bytes(), "printed"); err != nil {
		t.Errorf("the printed config does not load: %v\n%s", err, got)
	}
}
