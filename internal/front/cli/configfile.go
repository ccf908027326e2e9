package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/front/config"
)

// ConfigEnv names the config file when no --config is given.
const ConfigEnv = "PGBISECT_CONFIG"

// modulePath is pgbisect's module: a working directory whose go.mod names
// it is a pgbisect checkout, whose configs/pgbisect.yaml is used last.
const modulePath = "github.com/pgbisect/pgbisect"

// configSource is where the config in use came from.
type configSource struct {
	File string // the file, "" for the defaults
	From string // "--config", "PGBISECT_CONFIG", "the state directory", "the pgbisect checkout", "defaults"
	// Tried lists the files looked for and not found before the one used.
	Tried []string
}

// lookup is what findConfig needs from the process, a seam for tests.
type lookup struct {
	Getenv func(string) string
	Dir    string // the working directory
}

// findConfig finds the config file in one order, the first that applies
// winning:
//
//  1. --config FILE (it must exist);
//  2. $PGBISECT_CONFIG (it must exist);
//  3. STATE/pgbisect.yaml, STATE being --state, else $PGBISECT_STATE,
//     else the default state directory (config.DefaultStateDir);
//  4. configs/pgbisect.yaml in the working directory, only when the
//     working directory is a pgbisect checkout (its go.mod names module
//     github.com/pgbisect/pgbisect);
//  5. the defaults.
//
// A file named by --config or PGBISECT_CONFIG that does not exist is an
// error, not a fall-through: a typo must not silently mean the defaults.
func findConfig(flagFile, stateFlag string, l lookup) (configSource, error) {
	if flagFile != "" {
		return configSource{File: flagFile, From: "--config"}, nil
	}
	if f := l.Getenv(ConfigEnv); f != "" {
		if _, err := os.Stat(f); err != nil {
			return configSource{}, fmt.Errorf("%s names %s, which cannot be read: %w (unset it or point it at a config file)", ConfigEnv, f, err)
		}
		return configSource{File: f, From: ConfigEnv}, nil
	}
	var src configSource
	state := stateFlag
	if state == "" {
		state = l.Getenv("PGBISECT_STATE")
	}
	if state == "" {
		state = config.DefaultStateDir()
	}
	inState := filepath.Join(state, "pgbisect.yaml")
	if !filepath.IsAbs(inState) && l.Dir != "" {
		inState = filepath.Join(l.Dir, inState)
	}
	if regular(inState) {
		return configSource{File: inState, From: "the state directory"}, nil
	}
	src.Tried = append(src.Tried, inState)
	if l.Dir != "" && isCheckout(l.Dir) {
		f := filepath.Join(l.Dir, "configs", "pgbisect.yaml")
		if regular(f) {
			return configSource{File: f, From: "the pgbisect checkout", Tried: src.Tried}, nil
		}
		src.Tried = append(src.Tried, f)
	}
	src.From = "defaults"
	return src, nil
}

// regular reports whether path is an existing regular file.
func regular(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// isCheckout reports whether dir is a pgbisect checkout: its go.mod's
// module line names pgbisect's module.
func isCheckout(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == modulePath
		}
	}
	return false
}

// loadConfigFrom finds the config (findConfig) in the process's
// environment and working directory, and loads it.
func loadConfigFrom(flagFile, stateFlag string) (*config.Config, configSource, error) {
	wd, _ := os.Getwd()
	src, err := findConfig(flagFile, stateFlag, lookup{Getenv: os.Getenv, Dir: wd})
	if err != nil {
		return nil, src, err
	}
	if src.File == "" {
		return config.Default(), src, nil
	}
	cfg, err := config.LoadFile(src.File)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, src, fmt.Errorf("config file %s (from %s): %w", src.File, src.From, err)
		}
		return nil, src, err
	}
	return cfg, src, nil
}

// printConfigLine writes the one line a command that loads the config
// prints first on stderr: the config file in use and where it was found
// (or "defaults"), and the PostgreSQL repository (a URL redacted of any
// credentials, or a directory).
func printConfigLine(w io.Writer, src configSource, cfg *config.Config) {
	if w == nil {
		return
	}
	fmt.Fprintln(w, configLine(src, cfg))
}

// configLine is printConfigLine's line.
func configLine(src configSource, cfg *config.Config) string {
	conf := "defaults"
	if src.File != "" {
		conf = fmt.Sprintf("%s (from %s)", src.File, src.From)
	}
	repo := cfg.Repo
	if build.IsURL(repo) {
		repo = app.RedactURL(repo)
	}
	return fmt.Sprintf("pgbisect: config %s; repository %s", conf, repo)
}
