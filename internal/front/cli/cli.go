// Package cli implements the pgbisect command line: one file per
// subcommand, each registering itself with register in an init function.
// Results go to stdout, progress and logs to stderr; main only calls Main.
package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/base/strictyaml"
	"github.com/pgbisect/pgbisect/internal/front/config"
	"github.com/pgbisect/pgbisect/internal/front/jobs"
)

// Env is what a subcommand gets: its arguments, its writers and a logger.
type Env struct {
	Args   []string
	Stdout io.Writer
	Stderr io.Writer
	Log    *slog.Logger
}

// command is one subcommand.
type command struct {
	Name    string
	Summary string // one line for the command list
	Run     func(ctx context.Context, env *Env) error
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.Name]; dup {
		panic("cli: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

// errUsage marks an error whose message already says how to use the command;
// Main exits 2 for it.
var errUsage = errors.New("usage")

// usageError returns an error that Main reports with exit status 2.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// Main runs pgbisect with args (without the program name) and returns the
// process exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "-V" {
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "pgbisect: unknown command %q%s\nRun 'pgbisect help' for the list of commands.\n", args[0], suggest(args[0]))
		return 2
	}
	err := c.Run(ctx, &Env{Args: args[1:], Stdout: stdout, Stderr: stderr, Log: log})
	var status *exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &status):
		if status.err != nil {
			fmt.Fprintf(stderr, "pgbisect %s: %s\n", c.Name, strings.TrimPrefix(status.err.Error(), errUsage.Error()+": "))
		}
		return status.code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "pgbisect %s: %s\n", c.Name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		return 2
	case errors.Is(err, app.ErrBadRequest):
		fmt.Fprintf(stderr, "pgbisect %s: %v\n", c.Name, err)
		return 2
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "pgbisect %s: interrupted: %v\n", c.Name, err)
		return exitInterrupted
	default:
		fmt.Fprintf(stderr, "pgbisect %s: %v\n", c.Name, err)
		return 1
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "pgbisect builds PostgreSQL at commits, benchmarks them and bisects performance regressions.")
	fmt.Fprintln(w, "\nUsage: pgbisect COMMAND [flags] [args]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].Summary)
	}
	fmt.Fprintln(w, "\nRun 'pgbisect COMMAND -h' for a command's flags.")
}

// suggest returns a "did you mean" hint for a mistyped command name.
func suggest(name string) string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	if best := strictyaml.Closest(name, names); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

// newFlags returns a flag set for subcommand name whose errors and help go to
// env.Stderr.
func newFlags(env *Env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pgbisect %s %s\n\nFlags:\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseNoArgs parses env.Args with fs for a command that takes flags
// only; a positional argument is a usage error, with hint (what to give
// instead) when there is one.
func parseNoArgs(fs *flag.FlagSet, env *Env, hint string) error {
	pos, err := parseFlags(fs, env)
	if err != nil || len(pos) == 0 {
		return err
	}
	if hint != "" {
		return usageError("unexpected argument %q: %s", pos[0], hint)
	}
	return usageError("unexpected argument %q", pos[0])
}

// parseFlags parses env.Args with fs and returns the positional arguments.
// Flags may come before, between or after positional arguments
// ("run REV --samples 5"), as users of git and pgbench expect; "--" ends
// flag parsing.
func parseFlags(fs *flag.FlagSet, env *Env) ([]string, error) {
	var pos []string
	args := env.Args
	// The flag package prints the whole usage after any error; keep it
	// for -h only, and say in one line what was wrong instead.
	var out bytes.Buffer
	fs.SetOutput(&out)
	defer fs.SetOutput(env.Stderr)
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				env.Stderr.Write(out.Bytes())
				return nil, err
			}
			return nil, usageError("%s", flagError(fs, err))
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagError says what was wrong with a flag, suggesting the closest
// defined flag for a misspelt one.
func flagError(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return fmt.Sprintf("%v ('pgbisect %s -h' lists the flags)", err, fs.Name())
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	hint := ""
	if c := strictyaml.Closest(name, names); c != "" {
		hint = fmt.Sprintf(" (did you mean --%s?)", c)
	}
	return fmt.Sprintf("unknown flag --%s%s; 'pgbisect %s -h' lists the flags", name, hint, fs.Name())
}

// commonFlags are where a command finds things: the config file, the state
// directory, the PostgreSQL repository and, for commands that use it, the
// results database.
type commonFlags struct {
	config, state, repo, db *string
	// class is 'pgbisect request's machine class (nil elsewhere).
	class *string
}

// addCommonFlags declares --config, --state and --repo.
func addCommonFlags(fs *flag.FlagSet) commonFlags {
	return commonFlags{
		config: fs.String("config", "", "config `FILE` (default $PGBISECT_CONFIG, else STATE/pgbisect.yaml, else configs/pgbisect.yaml\n"+
			"in a pgbisect checkout, else the defaults; docs/cli.md)"),
		state: fs.String("state", "", "state `DIR` (default from the config)"),
		repo:  fs.String("repo", "", "PostgreSQL repository `DIR_OR_URL` (default from the config)"),
	}
}

// addStoreFlags declares the common flags and --db.
func addStoreFlags(fs *flag.FlagSet) commonFlags {
	f := addCommonFlags(fs)
	f.db = fs.String("db", "", "results database `URL` (default: the config's db, PGBISECT_DB, else a private cluster in the state directory)")
	return f
}

// load finds and loads the config (findConfig's order), applies the flags
// to it, with the state directory and a local repository made absolute,
// and prints on w (stderr; nil for none) the line naming the config file
// and the repository in use.
func (f commonFlags) load(w io.Writer) (*config.Config, error) {
	cfg, src, err := loadConfigFrom(*f.config, *f.state)
	if err != nil {
		return nil, err
	}
	if *f.state != "" {
		cfg.StateDir = *f.state
	}
	if *f.repo != "" {
		cfg.Repo = *f.repo
	}
	if f.db != nil && *f.db != "" {
		cfg.DB = *f.db
	}
	if abs, err := filepath.Abs(cfg.StateDir); err == nil {
		cfg.StateDir = abs
	}
	if !build.IsURL(cfg.Repo) {
		if abs, err := filepath.Abs(cfg.Repo); err == nil {
			cfg.Repo = abs
		}
	}
	printConfigLine(w, src, cfg)
	return cfg, nil
}

// open loads the config with the flags applied and opens the application
// on it. The caller closes it.
func (f commonFlags) open(ctx context.Context, env *Env) (*app.App, *config.Config, error) {
	cfg, err := f.load(env.Stderr)
	if err != nil {
		return nil, nil, err
	}
	a, err := app.Open(ctx, appOptions(cfg, env.Log), nil)
	if err != nil {
		return nil, nil, err
	}
	return a, cfg, nil
}

// appOptions are the application's parts as the config describes them: the
// one place where the config file's sections become components' options.
func appOptions(cfg *config.Config, log *slog.Logger) app.Options {
	var suite []string
	for _, s := range cfg.Nightly.Scenarios {
		path := cfg.ScenarioPath(s)
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		suite = append(suite, path)
	}
	machine := cfg.Machine.Name
	if machine == "" {
		host, _ := os.Hostname()
		machine = jobs.MachineName(host)
	}
	return app.Options{
		StateDir: cfg.StateDir, Machine: machine, Repo: cfg.Repo, Branch: cfg.Branch, DB: cfg.DB, RunAs: cfg.RunAs, DBRunAs: cfg.DBRunAs,
		Build: cfg.Build.Options, BuildTimeout: cfg.Build.Timeout,
		ClientBin: cfg.Bench.ClientBin, KeepClusters: cfg.Bench.KeepClusters,
		Stats: cfg.Stats, GitHub: cfg.GitHub.Options(), Nightly: suite, Scenarios: scenarioCatalog(cfg), Log: log,
	}
}

// scenarioCatalog is the scenario directory requests name scenarios from:
// scenarios/ beside the config file, or configs/scenarios without one.
func scenarioCatalog(cfg *config.Config) app.Scenarios {
	dir := "configs/scenarios"
	if cfg.File != "" {
		dir = filepath.Dir(cfg.ScenarioPath("scenarios/x.yaml"))
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return app.Scenarios{Dirs: []string{dir}}
}

// progress prints an operation's events to w, as a person watching wants
// them: each event's text, the bisection's decisions marked "==>".
func progress(w io.Writer) app.Sink {
	return func(e app.Event) {
		if line := eventLine(e); line != "" {
			fmt.Fprintln(w, line)
		}
	}
}

// eventLine is the line a person watching is shown for e, "" for none.
func eventLine(e app.Event) string {
	if e.Text != "" && e.Kind.Decision() {
		return "==> " + e.Text
	}
	return e.Text
}
