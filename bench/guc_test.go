package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/base/pgcluster"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"

	"github.com/pgbisect/pgbisect/internal/base/pgversion"
)

// versionTable is testdata/versions.txt: per kind ("setting", "wal_level",
// "initdb"), the names with the version range that has them.
type versionTable map[string]map[string][2]int // kind -> name -> [added, removed) as Num, 0: still there

func loadVersionTable(t *testing.T) versionTable {
	t.Helper()
	f, err := os.Open("testdata/versions.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vt := versionTable{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 {
			t.Fatalf("versions.txt:%d: want kind, name, added, removed", n)
		}
		added, err := pgversion.Parse(fields[2])
		if err != nil {
			t.Fatalf("versions.txt:%d: %v", n, err)
		}
		removed := 0
		if fields[3] != "-" {
			v, err := pgversion.Parse(fields[3])
			if err != nil {
				t.Fatalf("versions.txt:%d: %v", n, err)
			}
			removed = v.Num
		}
		if vt[fields[0]] == nil {
			vt[fields[0]] = map[string][2]int{}
		}
		vt[fields[0]][fields[1]] = [2]int{added.Num, removed}
	}
	return vt
}

func (vt versionTable) has(kind, name string, v pgversion.Version) bool {
	r, ok := vt[kind][name]
	return ok && v.Num >= r[0] && (r[1] == 0 || v.Num < r[1])
}

// tableVersions are the major versions the table describes.
var tableVersions = []string{"9.4", "9.5", "9.6", "10", "11", "12", "13", "14", "15", "16", "17"}

// server makes a Server of version v from the table. Its probe answers as
// the real server does for -c options: an unknown name, or a wal_level
// value the version does not have, is rejected.
func (vt versionTable) server(t *testing.T, v string) *Server {
	ver, err := pgversion.Parse(v)
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Version: ver, Settings: map[string]bool{}}
	for name := range vt["setting"] {
		if vt.has("setting", name, ver) {
			srv.Settings[name] = true
		}
	}
	srv.Probe = func(_ context.Context, settings map[string]string) *Rejection {
		for _, k := range sortedKeys(settings) {
			switch {
			case strings.Contains(k, "."):
			case !srv.Settings[k]:
				return &Rejection{Name: k, Unknown: true, Message: fmt.Sprintf("unrecognized configuration parameter %q", k)}
			case k == "wal_level" && !vt.has("wal_level", settings[k], ver):
				return &Rejection{Name: k, Message: fmt.Sprintf("invalid value for parameter \"wal_level\": %q", settings[k])}
			}
		}
		return nil
	}
	return srv
}

// TestInitdbFlagsEveryVersion checks that every option pgbisect gives
// initdb exists in every version of the table.
func TestInitdbFlagsEveryVersion(t *testing.T) {
	vt := loadVersionTable(t)
	for _, v := range tableVersions {
		ver, _ := pgversion.Parse(v)
		pc := &pgcluster.Cluster{Auth: pgcluster.Peer}
		for _, f := range pc.InitdbArgs("data", "", true) {
			if !strings.HasPrefix(f, "-") {
				continue // the value of the option before
			}
			name, _, _ := strings.Cut(f, "=")
			if !vt.has("initdb", name, ver) {
				t.Errorf("initdb %s does not know %s", v, name)
			}
		}
	}
	// The long form of -N is not in every version: that is why -N is used.
	v96, _ := pgversion.Parse("9.6")
	v10, _ := pgversion.Parse("10")
	if vt.has("initdb", "--no-sync", v96) || !vt.has("initdb", "--no-sync", v10) {
		t.Error("versions.txt: --no-sync should be new in 10")
	}
}

// TestResolveAcrossVersions resolves the settings of the seed scenarios
// and of the renamed settings against a server of every version of the
// table.
func TestResolveAcrossVersions(t *testing.T) {
	vt := loadVersionTable(t)
	own := map[string]string{"port": "5432", "listen_addresses": "", "unix_socket_directories": "/tmp"}
	section := func(constraint string, kv ...string) versionSection {
		c, err := pgversion.ParseConstraint(constraint)
		if err != nil {
			t.Fatal(err)
		}
		s := versionSection{constraint: c, where: "x.yaml:9", settings: map[string]*string{}}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "null" {
				s.settings[kv[i]] = nil
			} else {
				v := kv[i+1]
				s.settings[kv[i]] = &v
			}
		}
		return s
	}
	checkpointer := map[string]string{"maintenance_work_mem": "1GB", "fsync": "on", "synchronous_commit": "off",
		"shared_buffers": "4GB", "wal_level": "hot_standby", "max_wal_senders": "10", "max_wal_size": "8GB", "checkpoint_timeout": "30s"}
	flush := map[string]string{"backend_flush_after": "0", "bgwriter_flush_after": "0", "checkpoint_flush_after": "0",
		"max_wal_size": "16GB", "checkpoint_timeout": "1h", "autovacuum": "off"}
	seqscan := map[string]string{"shared_buffers": "32MB", "track_io_timing": "on", "max_worker_processes": "8",
		"max_parallel_workers": "8", "autovacuum": "off"}
	tests := []struct {
		name     string
		settings map[string]string
		sections []versionSection
		// want maps a version to the changed settings, or to "error: ..."
		// text the error must contain; versions not listed resolve with
		// the settings unchanged.
		want map[string]any
	}{
		{"checkpointer", checkpointer, nil, map[string]any{
			"9.4": map[string]string{"checkpoint_segments": "171", "max_wal_size": ""},
		}},
		{"checkpoint_segments", map[string]string{"checkpoint_segments": "64"}, nil, map[string]any{
			"9.5": map[string]string{"checkpoint_segments": "", "max_wal_size": "3072MB"}, "9.6": "same as 9.5",
			"10": "same as 9.5", "11": "same as 9.5", "12": "same as 9.5", "13": "same as 9.5", "14": "same as 9.5",
			"15": "same as 9.5", "16": "same as 9.5", "17": "same as 9.5",
		}},
		{"hot_standby is an alias from 9.6 on", map[string]string{"wal_level": "hot_standby"}, nil, nil},
		{"flush-after", flush, nil, map[string]any{
			"9.4": `error: PostgreSQL 9.4 does not know the setting "backend_flush_after"`,
			"9.5": `error: PostgreSQL 9.5 does not know the setting "backend_flush_after"`,
		}},
		{"flush-after by version", flush, []versionSection{section("<9.6", "backend_flush_after", "null",
			"bgwriter_flush_after", "null", "checkpoint_flush_after", "null")}, map[string]any{
			"9.4": map[string]string{"backend_flush_after": "", "bgwriter_flush_after": "", "checkpoint_flush_after": "",
				"max_wal_size": "", "checkpoint_segments": "342"},
			"9.5": map[string]string{"backend_flush_after": "", "bgwriter_flush_after": "", "checkpoint_flush_after": ""},
		}},
		{"parallel-seqscan", seqscan, nil, map[string]any{
			"9.4": `error: PostgreSQL 9.4 does not know the setting "max_parallel_workers"`,
			"9.5": `error: PostgreSQL 9.5 does not know the setting "max_parallel_workers"`,
			"9.6": `error: PostgreSQL 9.6 does not know the setting "max_parallel_workers"`,
		}},
		{"parallel-seqscan by version", seqscan, []versionSection{section("<10", "max_parallel_workers", "null")}, map[string]any{
			"9.4": map[string]string{"max_parallel_workers": ""}, "9.5": map[string]string{"max_parallel_workers": ""},
			"9.6": map[string]string{"max_parallel_workers": ""},
		}},
		{"sections apply in order", map[string]string{"shared_buffers": "1GB"}, []versionSection{
			section(">=10", "shared_buffers", "2GB"), section(">=13 <16", "shared_buffers", "3GB")}, map[string]any{
			"10": map[string]string{"shared_buffers": "2GB"}, "11": "same as 10", "12": "same as 10",
			"13": map[string]string{"shared_buffers": "3GB"}, "14": "same as 13", "15": "same as 13",
			"16": "same as 10", "17": "same as 10",
		}},
		{"wal_keep_segments", map[string]string{"wal_keep_segments": "32"}, nil, map[string]any{
			"13": map[string]string{"wal_keep_segments": "", "wal_keep_size": "512MB"}, "14": "same as 13",
			"15": "same as 13", "16": "same as 13", "17": "same as 13",
		}},
		{"wal_keep_size", map[string]string{"wal_keep_size": "1GB"}, nil, map[string]any{
			"9.4": map[string]string{"wal_keep_size": "", "wal_keep_segments": "64"}, "9.5": "same as 9.4",
			"9.6": "same as 9.4", "10": "same as 9.4", "11": "same as 9.4", "12": "same as 9.4",
		}},
		{"force_parallel_mode", map[string]string{"force_parallel_mode": "on"}, nil, map[string]any{
			"9.4": `error: PostgreSQL 9.4 does not know the setting "force_parallel_mode"`,
			"9.5": `error: PostgreSQL 9.5 does not know the setting "force_parallel_mode"`,
			"16":  map[string]string{"force_parallel_mode": "", "debug_parallel_query": "on"}, "17": "same as 16",
		}},
		{"a typo", map[string]string{"shared_bufers": "1GB"}, nil, map[string]any{
			"9.4": `error: PostgreSQL 9.4 does not know the setting "shared_bufers" (did you mean "shared_buffers"?)`,
			"9.5": "same as 9.4 in 9.5", "9.6": "same as 9.4 in 9.6", "10": "same as 9.4 in 10", "11": "same as 9.4 in 11",
			"12": "same as 9.4 in 12", "13": "same as 9.4 in 13", "14": "same as 9.4 in 14", "15": "same as 9.4 in 15",
			"16": "same as 9.4 in 16", "17": "same as 9.4 in 17",
		}},
	}
	for _, tc := range tests {
		for _, v := range tableVersions {
			srv := vt.server(t, v)
			want := tc.want[v]
			if s, ok := want.(string); ok && strings.HasPrefix(s, "same as ") {
				ref, in, _ := strings.Cut(strings.TrimPrefix(s, "same as "), " in ")
				want = tc.want[ref]
				if e, ok := want.(string); ok && in != "" {
					want = strings.Replace(e, "PostgreSQL "+ref, "PostgreSQL "+in, 1)
				}
			}
			got, err := srv.Resolve(context.Background(), tc.settings, tc.sections, own)
			if e, ok := want.(string); ok {
				if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(e, "error: ")) {
					t.Errorf("%s on %s: error %v, want %q", tc.name, v, err, e)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s on %s: %v", tc.name, v, err)
				continue
			}
			exp := map[string]string{}
			for k, val := range tc.settings {
				exp[k] = val
			}
			if changes, ok := want.(map[string]string); ok {
				for k, val := range changes {
					if val == "" {
						delete(exp, k)
					} else {
						exp[k] = val
					}
				}
			}
			if !reflect.DeepEqual(got.Settings, exp) {
				t.Errorf("%s on %s: settings %v, want %v (notes %q)", tc.name, v, got.Settings, exp, got.Notes)
			}
			if reflect.DeepEqual(got.Settings, tc.settings) != (len(got.Notes) == 0) && len(tc.sections) == 0 {
				t.Errorf("%s on %s: notes %q do not match the changes", tc.name, v, got.Notes)
			}
		}
	}
}

// TestOwnSettingRejected checks the message when a server refuses one of
// the settings pgbisect sets for every cluster.
func TestOwnSettingRejected(t *testing.T) {
	srv := &Server{Version: pgversion.Version{Num: 90200, Text: "9.2.24"}, Settings: map[string]bool{"port": true},
		Probe: func(_ context.Context, s map[string]string) *Rejection {
			return &Rejection{Name: "unix_socket_directories", Unknown: true, Message: `unrecognized configuration parameter "unix_socket_directories"`}
		}}
	_, err := srv.Resolve(context.Background(), nil, nil, map[string]string{"unix_socket_directories": "/tmp"})
	if err == nil || !strings.Contains(err.Error(), `PostgreSQL 9.2.24 rejects the setting unix_socket_directories = "/tmp" that pgbisect sets for every cluster`) {
		t.Errorf("error %v", err)
	}
}

func TestParseRejection(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want Rejection
	}{
		{"2026-11-30 14:18:13.059 GMT [27638] FATAL:  unrecognized configuration parameter \"checkpoint_segments\"\n",
			Rejection{Name: "checkpoint_segments", Unknown: true, Message: `unrecognized configuration parameter "checkpoint_segments"`}},
		{"FATAL:  invalid value for parameter \"wal_level\": \"replica\"\nHINT:  Available values: minimal, archive, hot_standby, logical.\n",
			Rejection{Name: "wal_level", Message: `invalid value for parameter "wal_level": "replica"`}},
	} {
		if got := parseRejection([]byte(tc.out)); !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("parseRejection(%q) = %+v, want %+v", tc.out, *got, tc.want)
		}
	}
}

// debianBin is Debian's PostgreSQL 15: real server binaries, so the
// describe-config and probe tests need no build.
const debianBin = "/usr/lib/postgresql/15/bin"

func requireDebian15(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(debianBin, "postgres")); err != nil {
		citest.Unavailable(t, "no PostgreSQL 15 server binaries in %s: apt-get install postgresql-15 (scripts/setup-debian.sh installs it)", debianBin)
	}
}

// TestDescribeServer reads Debian's postgres 15 and resolves settings
// against it for real, the probe included.
func TestDescribeServer(t *testing.T) {
	requireDebian15(t)
	r := &Runner{StateDir: t.TempDir()}
	u, err := r.user()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv, err := DescribeServer(ctx, debianBin, u)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Version.Major() != "15" || !srv.Settings["shared_buffers"] || !srv.Settings["max_wal_size"] || srv.Settings["checkpoint_segments"] {
		t.Fatalf("server %s with %d settings", srv.Version, len(srv.Settings))
	}
	own := map[string]string{"port": "5432", "listen_addresses": "", "unix_socket_directories": "/tmp"}
	for _, tc := range []struct {
		settings map[string]string
		want     map[string]string
		err      string
	}{
		{settings: map[string]string{"checkpoint_segments": "64", "wal_level": "hot_standby"},
			want: map[string]string{"max_wal_size": "3072MB", "wal_level": "hot_standby"}},
		// Not listed by --describe-config, yet a setting the server knows.
		{settings: map[string]string{"zero_damaged_pages": "on"}, want: map[string]string{"zero_damaged_pages": "on"}},
		{settings: map[string]string{"pg_stat_statements.max": "1000"}, want: map[string]string{"pg_stat_statements.max": "1000"}},
		{settings: map[string]string{"shared_buffers": "1GB", "no_such_setting": "1"},
			err: `PostgreSQL 15.18 does not know the setting "no_such_setting"`},
		{settings: map[string]string{"wal_level": "bogus"}, err: `PostgreSQL 15.18 rejects wal_level = "bogus": invalid value for parameter "wal_level": "bogus"`},
		{settings: map[string]string{"max_wal_size": "8XB"}, err: `PostgreSQL 15.18 rejects max_wal_size = "8XB"`},
	} {
		got, err := srv.Resolve(ctx, tc.settings, nil, own)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.settings, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.settings, err)
		} else if !reflect.DeepEqual(got.Settings, tc.want) {
			t.Errorf("%v: resolved to %v, want %v", tc.settings, got.Settings, tc.want)
		}
	}
}

// TestUnknownSettingRefusedBeforeMeasuring runs a comparison with a
// setting PostgreSQL 15 does not know: it must fail before any cluster is
// made, naming the setting, the server version and the scenario line.
func TestUnknownSettingRefusedBeforeMeasuring(t *testing.T) {
	requireDebian15(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "old.yaml")
	src := `settings:
  shared_buffers: 32MB
  checkpoint_segments: 64
  stats_temp_directory: pg_stat_tmp
  max_parallel_degree: 2
workload:
  - name: q
    sql: SELECT 1
metrics:
  - name: q_time
    step: q
    value: elapsed
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	r := &Runner{StateDir: filepath.Join(dir, "state"), Progress: &progress}
	targets := []Target{{Name: "A", BinDir: debianBin}, {Name: "B", BinDir: debianBin}}
	samples := 0
	err = Interleave(context.Background(), r, sc, targets, sc.Points()[0], Order{}, 1, func(int, *Sample) error { samples++; return nil })
	// stats_temp_directory was removed in 15.
	want := path + `:4: PostgreSQL 15.18 does not know the setting "stats_temp_directory"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
	if samples != 0 {
		t.Errorf("%d samples measured", samples)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "clusters")); !os.IsNotExist(err) {
		t.Errorf("a cluster directory was made: %v", err)
	}
	// Left out on 15, the same scenario passes the check, with the
	// renamed settings mapped.
	src2 := strings.Replace(src, "workload:", "settings_by_version:\n  \">=15\":\n    stats_temp_directory: ~\nworkload:", 1)
	if err := os.WriteFile(path, []byte(src2), 0o644); err != nil {
		t.Fatal(err)
	}
	if sc, err = LoadFile(path); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(context.Background(), sc, targets, sc.Points()[0]); err != nil {
		t.Errorf("with settings_by_version: %v", err)
	}
	for _, note := range []string{
		"[A] checkpoint_segments = 64 is max_wal_size = 3072MB on PostgreSQL 15.18",
		"[A] max_parallel_degree = 2 is max_parallel_workers_per_gather = 2 on PostgreSQL 15.18",
		"[A] stats_temp_directory not set on PostgreSQL 15.18 (settings_by_version \">=15\", " + path + ":8)",
	} {
		if !strings.Contains(progress.String(), note) {
			t.Errorf("progress does not say %q:\n%s", note, progress.String())
		}
	}
}
