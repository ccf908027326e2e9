// Package config loads pgbisect's configuration file (configs/pgbisect.yaml).
//
// Loading is strict: an unknown key or a value of the wrong type is an
// error naming the file and line, with a hint for likely typos. Defaults are
// applied before validation, so a missing file or an empty one is a valid
// configuration. Secrets never live here: the GitHub token comes only from
// the GITHUB_TOKEN environment variable.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/build"
	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/base/strictyaml"
	"github.com/pgbisect/pgbisect/notify"
)

// Config is the whole configuration. Field comments give the defaults.
type Config struct {
	// Repo is the PostgreSQL git repository: a local directory or a URL that
	// is cloned into the state directory once and fetched afterwards.
	// Default: https://git.postgresql.org/git/postgresql.git
	Repo string `yaml:"repo"`
	// Branch is the branch the nightly pass follows. Default: master.
	Branch string `yaml:"branch"`
	// StateDir holds the clone, worktrees, build cache, clusters, logs and
	// reports. Default: /var/lib/pgbisect as root, else
	// $XDG_STATE_HOME/pgbisect (~/.local/state/pgbisect). PGBISECT_STATE
	// overrides the file.
	StateDir string `yaml:"state_dir"`
	// RunAs is the unprivileged user that builds the commits (configure,
	// make) and runs initdb, the server and the client tools when pgbisect
	// runs as root. It must be an account of its own that owns nothing
	// else: a pull request's patch is built and served as this user.
	// Default: pgbisect-bench (scripts/setup-debian.sh creates it); a user
	// that runs a PostgreSQL server pgbisect did not make (Debian's
	// postgres with its system cluster) is refused.
	RunAs string `yaml:"run_as"`
	// DBRunAs is the user that runs the private results cluster when
	// pgbisect is root. It must differ from RunAs, so that a benchmark's
	// shell or SQL step (run as RunAs) cannot reach the store.
	// Default: pgbisect (scripts/setup-debian.sh creates it).
	DBRunAs string `yaml:"db_run_as"`
	// DB is the results database URL. Default: empty, meaning a private
	// cluster under the state directory. PGBISECT_DB overrides the file.
	DB string `yaml:"db"`

	Build   Build   `yaml:"build"`
	Bench   Bench   `yaml:"bench"`
	Stats   Stats   `yaml:"stats"`
	GitHub  GitHub  `yaml:"github"`
	Nightly Nightly `yaml:"nightly"`
	// Machine says who this machine is when several share the results
	// database (pgbisect daemon).
	Machine Machine `yaml:"machine"`
	Web     Web     `yaml:"web"`

	// File is the path the configuration was loaded from ("" for defaults).
	File string `yaml:"-"`
}

// Build is the build section: the builder's own options (build.Options:
// configure, cflags, meson, meson_options, all, contrib, jobs, no_compile;
// their defaults are none, empty, false, none, false (only what pgbisect
// runs), none, the number of CPUs and build.DefaultNoCompile) and how builds are bounded and kept. Changing an
// option that changes the binaries changes the build key, so builds with
// other options are cached separately.
type Build struct {
	build.Options `yaml:",inline"`
	// Timeout bounds one build. Default: 1h.
	Timeout time.Duration `yaml:"timeout"`
	// KeepMaxAge and KeepMaxBytes bound the build cache for "build --prune".
	// Default: 0 (keep everything).
	KeepMaxAge   time.Duration `yaml:"keep_max_age"`
	KeepMaxBytes int64         `yaml:"keep_max_bytes"`
}

// Bench holds settings for running scenarios.
type Bench struct {
	// ClientBin is the directory of the pgbench and psql used for every
	// measurement, so that a change in the client is not mistaken for one in
	// the server. Default: empty, meaning the client tools of the oldest
	// build in each comparison.
	ClientBin string `yaml:"client_bin"`
	// KeepClusters keeps cluster directories after a run, for debugging.
	// Default: false.
	KeepClusters bool `yaml:"keep_clusters"`
}

// Stats is the stats section of the config file and of a scenario: an
// overlay of bench/stats' thresholds (see stats.Overlay).
type Stats = stats.Overlay

// GitHub is the github section: the poster's own options
// (notify.GitHubOptions: repo, api_url, labels, report_url; defaults
// empty, meaning posting is disabled, https://api.github.com/,
// [pgbisect, performance-regression] and empty, meaning issue bodies name
// the plot files instead of showing them) and how the bot reads its
// comments.
type GitHub struct {
	notify.GitHubOptions `yaml:",inline"`
	// Poll is how often 'pgbisect daemon' reads the repository's comments
	// for commands addressed to the bot (@pgbisect bisect ...). Default:
	// 0, no polling (a webhook on 'pgbisect serve' can deliver them).
	Poll time.Duration `yaml:"poll"`
	// Handle addresses the bot in comments. Default: @pgbisect.
	Handle string `yaml:"handle"`
	// Allow lists GitHub users who may start jobs without write permission
	// on the repository. Default: none.
	Allow []string `yaml:"allow"`
	// RateLimit is how many jobs one user may start from comments per
	// day. Default: 10.
	RateLimit int `yaml:"rate_limit"`
	// DashboardURL is where 'pgbisect serve' is reachable, for the links
	// in the bot's answers. Default: none.
	DashboardURL string `yaml:"dashboard_url"`
	// PatchHosts are where `compare ... --patch URL` in a comment may
	// fetch a patch from: "host", "host/path" or "*.domain", https unless
	// the entry names its scheme. Default: github.com/user-attachments and
	// *.githubusercontent.com.
	PatchHosts []string `yaml:"patch_hosts"`
	// MaxPatchKiB caps a patch fetched for a comment (an attachment or a
	// pull request's diff). Default: 1024.
	MaxPatchKiB int `yaml:"max_patch_kib"`
}

// Nightly configures the nightly pass and the daemon.
type Nightly struct {
	// Schedule is a robfig/cron spec. Default: "0 2 * * *" (02:00 daily).
	Schedule string `yaml:"schedule"`
	// TimeZone is the schedule's IANA time zone. Default: UTC.
	TimeZone string `yaml:"time_zone"`
	// Scenarios are the scenario files of the nightly suite, relative to
	// the config file. Default: [scenarios/copy-single.yaml].
	Scenarios []string `yaml:"scenarios"`
}

// Machine names a daemon's machine and its class (docs/scale.md).
type Machine struct {
	// Name is the machine's name in the queue and on its samples.
	// Default: the host name, lowercased, other characters as '-'.
	Name string `yaml:"name"`
	// Class is the machine class whose jobs it takes, such as
	// bench-2core. Default: default.
	Class string `yaml:"class"`
	// LeaseTTL is how long a running job's lease lasts unless renewed: a
	// dead machine's job moves to another within about 4/3 of it.
	// Default: 2m.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// NightlyClasses are the classes that run the nightly pass; every
	// daemon should list all of them. Default: [Class].
	NightlyClasses []string `yaml:"nightly_classes"`
}

// Web configures the dashboard ('pgbisect serve', docs/dashboard.md). Its
// token is PGBISECT_WEB_TOKEN, from the environment only.
type Web struct {
	// Private makes every page, the JSON API, the event streams and
	// /metrics need the token (a bearer token, or a session made by
	// signing in with it). Default: false, the pages are public and only
	// writes need the token.
	Private bool `yaml:"private"`
}

// Default returns the configuration used when no file is given.
func Default() *Config {
	c := &Config{}
	c.applyDefaults()
	return c
}

func (c *Config) applyDefaults() {
	if c.Repo == "" {
		c.Repo = "https://git.postgresql.org/git/postgresql.git"
	}
	if c.Branch == "" {
		c.Branch = "master"
	}
	if s := os.Getenv("PGBISECT_STATE"); s != "" {
		c.StateDir = s
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir()
	}
	if c.RunAs == "" {
		c.RunAs = proc.BenchUser
	}
	if c.DBRunAs == "" {
		c.DBRunAs = "pgbisect"
	}
	if s := os.Getenv("PGBISECT_DB"); s != "" {
		c.DB = s
	}
	if c.Build.Timeout == 0 {
		c.Build.Timeout = time.Hour
	}
	if c.GitHub.APIURL == "" {
		c.GitHub.APIURL = "https://api.github.com/"
	}
	if len(c.GitHub.Labels) == 0 {
		c.GitHub.Labels = []string{"pgbisect", "performance-regression"}
	}
	if c.Nightly.Schedule == "" {
		c.Nightly.Schedule = "0 2 * * *"
	}
	if c.Nightly.TimeZone == "" {
		c.Nightly.TimeZone = "UTC"
	}
	if len(c.Nightly.Scenarios) == 0 {
		c.Nightly.Scenarios = []string{"scenarios/copy-single.yaml"}
	}
}

// DefaultStateDir is /var/lib/pgbisect for root and
// $XDG_STATE_HOME/pgbisect (or ~/.local/state/pgbisect) for anyone else.
// Root's default is outside /root so the unprivileged server user can reach
// the builds and clusters kept there.
func DefaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/pgbisect"
	}
	if x := os.Getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Join(x, "pgbisect")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "pgbisect")
	}
	return filepath.Join(home, ".local", "state", "pgbisect")
}

// LoadFile reads and validates the configuration at path.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	c, err := Load(data, path)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Load parses and validates configuration data; name is used in errors.
func Load(data []byte, name string) (*Config, error) {
	c := &Config{}
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := yaml.UnmarshalWithOptions(data, c, yaml.DisallowUnknownField()); err != nil {
			return nil, strictyaml.Error(name, err, knownKeys)
		}
	}
	c.File = name
	c.applyDefaults()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

var knownKeys = []string{"repo", "branch", "state_dir", "run_as", "db_run_as", "db", "build", "bench", "stats", "github", "nightly",
	"configure", "cflags", "meson", "meson_options", "all", "contrib", "jobs", "no_compile", "timeout", "keep_max_age", "keep_max_bytes",
	"client_bin", "keep_clusters", "alpha", "confidence", "min_effect", "start_samples", "batch", "max_samples", "max_time",
	"api_url", "labels", "report_url", "poll", "handle", "allow", "rate_limit", "dashboard_url", "schedule", "time_zone", "scenarios",
	"web", "private"}

func (c *Config) validate() error {
	if c.DBRunAs == c.RunAs {
		return fmt.Errorf("db_run_as and run_as are both %q: the results store must run as another OS user than the benchmark servers, so that a scenario's steps cannot reach it", c.RunAs)
	}
	if err := build.CheckContrib(c.Build.Contrib); err != nil {
		return err
	}
	if c.Build.Jobs < 0 {
		return errors.New("build.jobs must be 0 (all CPUs) or more")
	}
	if c.Stats.Alpha < 0 || c.Stats.Alpha >= 0.5 {
		return fmt.Errorf("stats.alpha %g is out of range: use a small probability such as 0.01", c.Stats.Alpha)
	}
	if c.Stats.MinEffect < 0 || c.Stats.MinEffect >= 1 {
		return fmt.Errorf("stats.min_effect %g is out of range: it is a fraction, 0.03 means 3%%", c.Stats.MinEffect)
	}
	if c.GitHub.Repo != "" && strings.Count(c.GitHub.Repo, "/") != 1 {
		return fmt.Errorf("github.repo %q must be owner/name", c.GitHub.Repo)
	}
	if _, err := time.LoadLocation(c.Nightly.TimeZone); err != nil {
		return fmt.Errorf("nightly.time_zone %q: %w", c.Nightly.TimeZone, err)
	}
	return nil
}

// ScenarioPath resolves a nightly scenario path relative to the config file.
func (c *Config) ScenarioPath(p string) string {
	if filepath.IsAbs(p) || c.File == "" {
		return p
	}
	return filepath.Join(filepath.Dir(c.File), p)
}

// Options returns the poster options of the github section, with the token
// from the GITHUB_TOKEN environment variable.
func (g GitHub) Options() notify.GitHubOptions {
	o := g.GitHubOptions
	o.Token = os.Getenv("GITHUB_TOKEN")
	return o
}
