package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/pgversion"
	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/base/strictyaml"
)

// Server is what a build's own postgres binary says about itself, read
// before any cluster of it is made.
type Server struct {
	// Version is from "postgres --version".
	Version pgversion.Version
	// Settings are the names "postgres --describe-config" lists. It leaves
	// out settings marked not for postgresql.conf's sample (developer
	// options such as zero_damaged_pages), so a name missing here is
	// confirmed by the probe (see Probe) before it is called unknown.
	Settings map[string]bool
	// Probe checks settings the way the server reads them at start (nil:
	// no check beyond Settings). It returns nil when all are accepted.
	Probe func(ctx context.Context, settings map[string]string) *Rejection
}

// Rejection is a setting the server refused.
type Rejection struct {
	Name string
	// Unknown is true for an unrecognized setting, false for a bad value.
	Unknown bool
	// Message is the server's own words.
	Message string
}

// SettingError is a scenario setting a server refuses: one it does not
// know, or a value it rejects.
type SettingError struct {
	Name    string // the setting
	Version string // the server's version ("15.18")
	Msg     string // the whole message, naming both
}

func (e *SettingError) Error() string { return e.Msg }

// describeTimeout bounds each run of postgres to describe or probe.
const describeTimeout = 30 * time.Second

// DescribeServer runs binDir/postgres --version and --describe-config, as
// u when pgbisect is root (postgres refuses to run as root), and returns a
// Server whose Probe runs that postgres too.
func DescribeServer(ctx context.Context, binDir string, u *proc.User) (*Server, error) {
	postgres := binDir + "/postgres"
	out, err := runPostgres(ctx, u, postgres, "--version")
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w\n%s", postgres, err, proc.Tail(string(out), 5))
	}
	m := versionRe.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("%s --version printed %q, not a PostgreSQL version", postgres, strings.TrimSpace(string(out)))
	}
	v, err := pgversion.Parse(string(m[1]))
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", postgres, err)
	}
	out, err = runPostgres(ctx, u, postgres, "--describe-config")
	if err != nil {
		return nil, fmt.Errorf("%s --describe-config: %w\n%s", postgres, err, proc.Tail(string(out), 5))
	}
	srv := &Server{Version: v, Settings: parseDescribeConfig(out)}
	if len(srv.Settings) == 0 {
		return nil, fmt.Errorf("%s --describe-config listed no settings", postgres)
	}
	srv.Probe = func(ctx context.Context, settings map[string]string) *Rejection {
		return probeSettings(ctx, u, postgres, settings)
	}
	return srv, nil
}

var versionRe = regexp.MustCompile(`\(PostgreSQL\) ([0-9][0-9.]*[a-z0-9]*)`)

// parseDescribeConfig takes the first tab-separated field of every line:
// the setting's name (then context, group, type, default, ...).
func parseDescribeConfig(out []byte) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, ok := strings.Cut(line, "\t")
		if ok && name != "" {
			names[name] = true
		}
	}
	return names
}

func runPostgres(ctx context.Context, u *proc.User, postgres string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	cmd := proc.Command(ctx, u, postgres, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"LC_ALL=C", "PATH=/usr/bin:/bin"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// probeSettings starts postgres with the settings on its command line and an
// empty configuration file. postgres checks every -c name and value as it
// parses its options, then stops because it has no data directory, so
// the check needs no cluster and starts nothing.
func probeSettings(ctx context.Context, u *proc.User, postgres string, settings map[string]string) *Rejection {
	args := []string{"--config-file=/dev/null"}
	for _, k := range sortedKeys(settings) {
		args = append(args, "-c", k+"="+settings[k])
	}
	out, err := runPostgres(ctx, u, postgres, args...)
	if err == nil {
		return &Rejection{Message: "postgres started without a data directory: cannot check settings"}
	}
	if bytes.Contains(out, []byte("does not know where to find the database system data")) {
		return nil
	}
	return parseRejection(out)
}

var (
	unknownRe   = regexp.MustCompile(`unrecognized configuration parameter "([^"]+)"`)
	parameterRe = regexp.MustCompile(`parameter "([^"]+)"`)
	fatalRe     = regexp.MustCompile(`(?m)(?:FATAL|ERROR):\s+(.*)$`)
)

// parseRejection reads the server's complaint about a -c option.
func parseRejection(out []byte) *Rejection {
	msg := strings.TrimSpace(string(out))
	if m := fatalRe.FindStringSubmatch(msg); m != nil {
		msg = m[1]
	}
	if m := unknownRe.FindStringSubmatch(msg); m != nil {
		return &Rejection{Name: m[1], Unknown: true, Message: msg}
	}
	r := &Rejection{Message: msg}
	if m := parameterRe.FindStringSubmatch(msg); m != nil {
		r.Name = m[1]
	}
	return r
}

// rename is a setting PostgreSQL renamed: old servers know Old, new ones
// New. toNew and toOld convert a value (nil: the same value).
type rename struct {
	Old, New     string
	Since        string // the release that renamed it, for messages
	toNew, toOld func(string) (string, error)
}

// renames are the renamed settings pgbisect maps in either direction when
// the server knows only the other name. Sources: the release notes of 9.5
// (checkpoint_segments; max_wal_size = 3 * checkpoint_segments * 16MB),
// 9.6 (max_parallel_degree, renamed before release), 10
// (min_parallel_relation_size), 13 (wal_keep_segments, now a size) and 16
// (force_parallel_mode).
var renames = []rename{
	{Old: "checkpoint_segments", New: "max_wal_size", Since: "9.5", toNew: segmentsToMB(3), toOld: mbToSegments(3)},
	{Old: "max_parallel_degree", New: "max_parallel_workers_per_gather", Since: "9.6"},
	{Old: "min_parallel_relation_size", New: "min_parallel_table_scan_size", Since: "10"},
	{Old: "wal_keep_segments", New: "wal_keep_size", Since: "13", toNew: segmentsToMB(1), toOld: mbToSegments(1)},
	{Old: "force_parallel_mode", New: "debug_parallel_query", Since: "16"},
}

// segmentsToMB converts a count of 16MB WAL segments, times k, to a size.
func segmentsToMB(k int) func(string) (string, error) {
	return func(v string) (string, error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return "", fmt.Errorf("%q is not a number of segments", v)
		}
		return fmt.Sprintf("%dMB", n*k*16), nil
	}
}

// mbToSegments converts a size with a unit to 16MB WAL segments, divided
// by k and rounded up.
func mbToSegments(k int) func(string) (string, error) {
	return func(v string) (string, error) {
		mb, err := sizeMB(v)
		if err != nil {
			return "", err
		}
		return strconv.Itoa(max(1, int(math.Ceil(mb/float64(16*k))))), nil
	}
}

// sizeMB reads a size such as "8GB" or "512MB". A bare number is refused:
// its unit differs between versions.
func sizeMB(v string) (float64, error) {
	s := strings.TrimSpace(v)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 {
		return 0, fmt.Errorf("%q: give the size with a unit (kB, MB, GB, TB) so it can be converted", v)
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size", v)
	}
	switch strings.TrimSpace(s[i:]) {
	case "kB":
		return n / 1024, nil
	case "MB":
		return n, nil
	case "GB":
		return n * 1024, nil
	case "TB":
		return n * 1024 * 1024, nil
	}
	return 0, fmt.Errorf("%q: unknown unit (use kB, MB, GB or TB)", v)
}

// walLevelAliases are the other spellings of a wal_level value: 9.6 merged
// archive and hot_standby into replica (still accepted as hidden aliases),
// so a server that rejects one gets the other.
var walLevelAliases = map[string]string{
	"replica":     "hot_standby",
	"hot_standby": "replica",
	"archive":     "replica",
}

// ServerSettings are settings resolved for one server: what to write to
// postgresql.conf and what was changed on the way.
type ServerSettings struct {
	Settings map[string]string
	// Notes say what was mapped, one line each ("max_wal_size = 8GB is
	// checkpoint_segments = 171 on PostgreSQL 9.4").
	Notes []string
}

// versionSection is one settings_by_version entry, templates executed:
// a nil value removes the setting.
type versionSection struct {
	constraint pgversion.Constraint
	where      string // file:line
	settings   map[string]*string
}

// Resolve returns the settings to give srv: settings, with the sections
// whose version constraint srv's version satisfies applied in file order,
// renamed settings mapped to the name the server knows, and then checked
// with srv.Probe, which also maps wal_level values the server rejects to
// their alias. own are settings pgbisect sets itself (port, sockets); they
// are probed too but not returned. A setting the server does not know is
// an error naming it and the server's version.
func (srv *Server) Resolve(ctx context.Context, settings map[string]string, sections []versionSection, own map[string]string) (*ServerSettings, error) {
	out := &ServerSettings{Settings: map[string]string{}}
	for k, v := range settings {
		out.Settings[k] = v
	}
	for _, sec := range sections {
		if !sec.constraint.Allows(srv.Version) {
			continue
		}
		for _, k := range sortedKeys(sec.settings) {
			if v := sec.settings[k]; v == nil {
				delete(out.Settings, k)
				out.note("%s not set on PostgreSQL %s (settings_by_version %q, %s)", k, srv.Version, sec.constraint, sec.where)
			} else {
				out.Settings[k] = *v
			}
		}
	}
	for _, k := range sortedKeys(out.Settings) {
		if srv.Settings[k] || strings.Contains(k, ".") {
			continue
		}
		if err := out.rename(srv, k); err != nil {
			return nil, err
		}
	}
	if srv.Probe == nil {
		return out, nil
	}
	for tries := 0; tries <= len(out.Settings); tries++ {
		all := map[string]string{}
		for k, v := range own {
			all[k] = v
		}
		for k, v := range out.Settings {
			all[k] = v
		}
		rej := srv.Probe(ctx, all)
		if rej == nil {
			return out, nil
		}
		v, scenario := out.Settings[rej.Name]
		switch {
		case !scenario && own[rej.Name] != "":
			return nil, fmt.Errorf("PostgreSQL %s rejects the setting %s = %q that pgbisect sets for every cluster: %s", srv.Version, rej.Name, own[rej.Name], rej.Message)
		case !scenario:
			return nil, fmt.Errorf("PostgreSQL %s rejects the settings: %s", srv.Version, rej.Message)
		case rej.Unknown:
			return nil, srv.unknown(rej.Name)
		case rej.Name == "wal_level" && walLevelAliases[v] != "" && !out.mapped("wal_level"):
			out.Settings["wal_level"] = walLevelAliases[v]
			out.note("wal_level = %s is wal_level = %s on PostgreSQL %s", v, walLevelAliases[v], srv.Version)
		default:
			return nil, &SettingError{Name: rej.Name, Version: srv.Version.String(),
				Msg: fmt.Sprintf("PostgreSQL %s rejects %s = %q: %s", srv.Version, rej.Name, v, rej.Message)}
		}
	}
	return nil, fmt.Errorf("PostgreSQL %s: the settings could not be made acceptable", srv.Version)
}

func (s *ServerSettings) note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

// mapped reports whether a note already maps name (so a rejected mapping
// is not undone in a loop).
func (s *ServerSettings) mapped(name string) bool {
	for _, n := range s.Notes {
		if strings.HasPrefix(n, name+" = ") {
			return true
		}
	}
	return false
}

// rename maps k, a setting srv does not list, to the name srv knows, or
// leaves it for the probe when no rename applies.
func (s *ServerSettings) rename(srv *Server, k string) error {
	for _, r := range renames {
		from, to, conv := r.Old, r.New, r.toNew
		if k == r.New {
			from, to, conv = r.New, r.Old, r.toOld
		}
		if k != from || !srv.Settings[to] {
			continue
		}
		v := s.Settings[k]
		delete(s.Settings, k)
		if _, both := s.Settings[to]; both {
			s.note("%s = %s dropped on PostgreSQL %s: it does not know %s, and %s is set too", k, v, srv.Version, k, to)
			return nil
		}
		nv := v
		if conv != nil {
			var err error
			if nv, err = conv(v); err != nil {
				return &SettingError{Name: k, Version: srv.Version.String(),
					Msg: fmt.Sprintf("setting %s (renamed %s in PostgreSQL %s, which PostgreSQL %s has): %v", k, to, r.Since, srv.Version, err)}
			}
		}
		s.Settings[to] = nv
		s.note("%s = %s is %s = %s on PostgreSQL %s", k, v, to, nv, srv.Version)
		return nil
	}
	return nil
}

// unknown is the error for a setting the server does not know.
func (srv *Server) unknown(name string) *SettingError {
	names := make([]string, 0, len(srv.Settings))
	for n := range srv.Settings {
		names = append(names, n)
	}
	sort.Strings(names)
	msg := fmt.Sprintf("PostgreSQL %s does not know the setting %q", srv.Version, name)
	if c := strictyaml.Closest(name, names); c != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", c)
	}
	return &SettingError{Name: name, Version: srv.Version.String(),
		Msg: msg + ": remove it, or set it only on the versions that have it with settings_by_version (see docs/scenarios.md)"}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
