package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/goccy/go-yaml"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/config"
)

func init() {
	register(command{
		Name:    "config",
		Summary: "print the effective configuration (every key, secrets redacted) and the file it came from",
		Run:     configRun,
	})
}

func configRun(ctx context.Context, env *Env) error {
	fs := newFlags(env, "config", "[--config FILE] [--state DIR] [--repo DIR_OR_URL] [--db URL]\n\n"+
		"Prints the configuration the other commands would use with the same flags, as YAML that\n"+
		"'--config' accepts, after a comment naming the file and the lookup order (docs/cli.md).")
	flags := addStoreFlags(fs)
	if err := parseNoArgs(fs, env, "config takes flags only"); err != nil {
		return err
	}
	_, src, err := loadConfigFrom(*flags.config, *flags.state)
	if err != nil {
		return err
	}
	// The flags as load applies them, without its line on stderr: the
	// source is the output's first comment instead.
	cfg, err := flags.load(nil)
	if err != nil {
		return err
	}
	return configPrint(env.Stdout, src, cfg, os.Getenv)
}

// configPrint writes cfg as YAML after comments saying where it came from,
// which files the lookup tried before, and which secrets the environment
// holds (never their values). URLs in repo and db are redacted of
// credentials.
func configPrint(w io.Writer, src configSource, cfg *config.Config, getenv func(string) string) error {
	if src.File != "" {
		fmt.Fprintf(w, "# config file: %s (from %s)\n", src.File, src.From)
	} else {
		fmt.Fprintf(w, "# config file: none, the defaults\n")
	}
	for _, t := range src.Tried {
		fmt.Fprintf(w, "# looked for, not found: %s\n", t)
	}
	fmt.Fprintf(w, "# lookup order: --config, $%s, STATE/pgbisect.yaml, configs/pgbisect.yaml in a pgbisect checkout, defaults\n", ConfigEnv)
	for _, e := range []string{"PGBISECT_STATE", "PGBISECT_DB"} {
		if v := getenv(e); v != "" {
			fmt.Fprintf(w, "# %s=%s overrides the file\n", e, app.RedactURL(v))
		}
	}
	for _, e := range []string{"GITHUB_TOKEN", webTokenEnv} {
		state := "not set"
		if getenv(e) != "" {
			state = "set"
		}
		fmt.Fprintf(w, "# %s: %s (secrets come only from the environment)\n", e, state)
	}
	fmt.Fprintf(w, "# 0 or empty: the default the component applies (configs/pgbisect.yaml's comments)\n")
	shown := *cfg
	shown.Repo = app.RedactURL(cfg.Repo)
	shown.DB = app.RedactURL(cfg.DB)
	data, err := yaml.Marshal(&shown)
	if err != nil {
		return fmt.Errorf("printing the config: %w", err)
	}
	_, err = w.Write(data)
	return err
}
