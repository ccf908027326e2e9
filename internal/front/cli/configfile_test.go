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

// TestFindConfigOrder: --config, then PGBISECT_CONFIG, then
// STATE/pgbisect.yaml (--state, else PGBISECT_STATE), then
// configs/pgbisect.yaml only in a pgbisect checkout, then the defaults.
func TestFindConfigOrder(t *testing.T) {
	root := t.TempDir()
	write := func(rel, data string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flagFile := write("flag.yaml", "")
	envFile := write("env.yaml", "")
	flagState := write("flagstate/pgbisect.yaml", "")
	envState := write("envstate/pgbisect.yaml", "")
	checkout := filepath.Join(root, "pgbisect")
	write("pgbisect/go.mod", "module github.com/pgbisect/pgbisect\n\ngo 1.26\n")
	inCheckout := write("pgbisect/configs/pgbisect.yaml", "")
	other := filepath.Join(root, "other")
	write("other/go.mod", "module example.com/other\n")
	write("other/configs/pgbisect.yaml", "")
	empty := filepath.Join(root, "emptystate")

	for _, tt := range []struct {
		name             string
		flag, state, dir string
		env              map[string]string
		want, from       string
	}{
		{"flag wins", flagFile, filepath.Join(root, "flagstate"), checkout, map[string]string{ConfigEnv: envFile}, flagFile, "--config"},
		{"env next", "", filepath.Join(root, "flagstate"), checkout, map[string]string{ConfigEnv: envFile}, envFile, ConfigEnv},
		{"--state dir", "", filepath.Join(root, "flagstate"), checkout, map[string]string{"PGBISECT_STATE": filepath.Join(root, "envstate")}, flagState, "the state directory"},
		{"PGBISECT_STATE dir", "", "", checkout, map[string]string{"PGBISECT_STATE": filepath.Join(root, "envstate")}, envState, "the state directory"},
		{"checkout", "", empty, checkout, nil, inCheckout, "the pgbisect checkout"},
		{"not a checkout", "", empty, other, nil, "", "defaults"},
		{"no go.mod", "", empty, root, nil, "", "defaults"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := lookup{Getenv: func(k string) string { return tt.env[k] }, Dir: tt.dir}
			src, err := findConfig(tt.flag, tt.state, l)
			if err != nil {
				t.Fatal(err)
			}
			if src.File != tt.want || src.From != tt.from {
				t.Errorf("config %q from %q, want %q from %q (tried %v)", src.File, src.From, tt.want, tt.from, src.Tried)
			}
		})
	}
	l := lookup{Getenv: func(k string) string { return map[string]string{ConfigEnv: filepath.Join(root, "typo.yaml")}[k] }, Dir: checkout}
	if _, err := findConfig("", "", l); err == nil || !strings.Contains(err.Error(), "PGBISECT_CONFIG names") {
		t.Errorf("a PGBISECT_CONFIG naming no file: %v, want an error naming it", err)
	}
}

// TestConfigLine: the line names the file and where it came from, or
// defaults, and the repository with its credentials redacted.
func TestConfigLine(t *testing.T) {
	cfg := config.Default()
	cfg.Repo = "https://bot:s3cret@git.example.com/postgresql.git"
	got := configLine(configSource{From: "defaults"}, cfg)
	if !strings.HasPrefix(got, "pgbisect: config defaults; repository https://") || strings.Contains(got, "s3cret") || !strings.Contains(got, "git.example.com/postgresql.git") {
		t.Errorf("configLine = %q", got)
	}
	cfg.Repo = "/home/me/postgresql"
	if got := configLine(configSource{File: "/etc/pgbisect.yaml", From: ConfigEnv}, cfg); got != "pgbisect: config /etc/pgbisect.yaml (from PGBISECT_CONFIG); repository /home/me/postgresql" {
		t.Errorf("configLine = %q", got)
	}
}

// TestConfigLinePrinted: a command that loads the config says on stderr,
// first, which file it used (here one in the --state directory, whose repo
// it takes) and the repository.
func TestConfigLinePrinted(t *testing.T) {
	state := t.TempDir()
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(state, "pgbisect.yaml"), []byte("repo: "+repo+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(ConfigEnv, "")
	var out, errb bytes.Buffer
	Main(context.Background(), []string{"build", "--state", state, "--list"}, &out, &errb)
	first, _, _ := strings.Cut(errb.String(), "\n")
	want := "pgbisect: config " + filepath.Join(state, "pgbisect.yaml") + " (from the state directory); repository " + repo
	if first != want {
		t.Errorf("first stderr line %q, want %q\n%s", first, want, errb.String())
	}
}
