package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/base/pgversion"
)

// TestSettingsByVersionErrors checks the strict loading of
// settings_by_version: each mistake is named with its file and line.
func TestSettingsByVersionErrors(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"no operator", "settings_by_version:\n  \"10\":\n    shared_buffers: 1GB\n",
			`x.yaml:3: settings_by_version: version constraint "10": "10" has no operator (use <, <=, >, >= or =, e.g. "<10")`},
		{"not a version", "settings_by_version:\n  \"<ten\":\n    shared_buffers: 1GB\n",
			`x.yaml:3: settings_by_version: version constraint "<ten": "ten" is not a version like 9.6, 10 or 15.4`},
		{"a number as key", "settings_by_version:\n  10:\n    shared_buffers: 1GB\n",
			`x.yaml:2: settings_by_version entry 1: the key must be a quoted version constraint such as "<10" or ">=9.6 <13"`},
		{"not a mapping", "settings_by_version:\n  \"<9.5\": 64\n",
			`x.yaml:2: settings_by_version "<9.5" must map setting names to values (null leaves a setting out), like {checkpoint_segments: 64}`},
		{"bad setting name", "settings_by_version:\n  \"<9.5\":\n    \"checkpoint segments\": 64\n",
			`x.yaml:3: settings_by_version "<9.5": "checkpoint segments" is not a setting name`},
		{"list value", "settings_by_version:\n  \"<9.5\":\n    checkpoint_segments: [64]\n",
			`x.yaml:3: setting "checkpoint_segments": value must be a string, number or boolean, not []interface {}`},
		{"bad template", "settings_by_version:\n  \"<9.5\":\n    checkpoint_segments: \"{{.segs}}\"\n",
			`x.yaml:3: unknown variable "segs" in template`},
		{"typo in the key", "settings_by_versions:\n  \"<9.5\": {}\n",
			`x.yaml:1: unknown key "settings_by_versions" (did you mean "settings_by_version"?)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load([]byte(c.yaml+baseScenario), "x.yaml", nil)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestSettingsByVersionExpand checks that sections are kept in file order
// with templates executed and nulls kept as removals.
func TestSettingsByVersionExpand(t *testing.T) {
	src := "settings:\n  max_wal_size: 8GB\nsettings_by_version:\n  \"<9.5\":\n    max_wal_size: ~\n    checkpoint_segments: \"{{mul .scale 64}}\"\n  \">=9.6 <10\":\n    max_parallel_workers: null\n" + baseScenario
	sc, err := Load([]byte(src), "x.yaml", map[string]string{"scale": "2"})
	if err != nil {
		t.Fatal(err)
	}
	exp, err := sc.expand(sc.Points()[0], placeholderRuntime)
	if err != nil {
		t.Fatal(err)
	}
	if len(exp.byVersion) != 2 {
		t.Fatalf("%d sections", len(exp.byVersion))
	}
	s0, s1 := exp.byVersion[0], exp.byVersion[1]
	if s0.constraint.String() != "<9.5" || s1.constraint.String() != ">=9.6 <10" {
		t.Errorf("sections %q, %q", s0.constraint, s1.constraint)
	}
	if v, ok := s0.settings["max_wal_size"]; !ok || v != nil {
		t.Errorf("max_wal_size: %v, %v; want a removal", v, ok)
	}
	if v := s0.settings["checkpoint_segments"]; v == nil || *v != "128" {
		t.Errorf("checkpoint_segments = %v, want 128", v)
	}
	if v, ok := s1.settings["max_parallel_workers"]; !ok || v != nil {
		t.Errorf("max_parallel_workers: %v, %v; want a removal", v, ok)
	}
	if s0.where != "x.yaml:5" {
		t.Errorf("where %q", s0.where)
	}
}

// TestVersionsErrors checks the strict loading of the versions section.
func TestVersionsErrors(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"no operator", "versions:\n  supported: \"12\"\n  why: x\n",
			`x.yaml:2: versions: version constraint "12": "12" has no operator`},
		{"no why", "versions:\n  supported: \">=12\"\n",
			`x.yaml:2: versions: say why the scenario needs >=12`},
		{"no constraint", "versions:\n  why: COPY WHERE\n",
			`x.yaml:2: versions: give supported`},
		{"typo", "versions:\n  suported: \">=12\"\n",
			`x.yaml:2: unknown key "suported"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load([]byte(c.yaml+baseScenario), "x.yaml", nil)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
	sc, err := Load([]byte("versions: {supported: \">=12 <18\", why: \"x\"}\n"+baseScenario), "x.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]bool{"11.22": false, "12": true, "13.16": true, "17.6": true, "18devel": false, "18.6": false} {
		ver, err := pgversion.Parse(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := sc.SupportsVersion(ver); got != want {
			t.Errorf("SupportsVersion(%s) = %v, want %v", v, got, want)
		}
	}
}

// TestVersionRefusedBeforeMeasuring runs a scenario that needs a newer
// server on Debian's 15: Interleave (Check) and Run refuse it with a
// *VersionError naming the file, line, constraint and why, before any
// cluster is made.
func TestVersionRefusedBeforeMeasuring(t *testing.T) {
	requireDebian15(t)
	r, state := newTestRunner(t)
	path := filepath.Join(state, "new.yaml")
	src := "versions:\n  supported: \">=16\"\n  why: pg_stat_io is new in 16\n" + baseScenario
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	targets := []Target{{Name: "A", BinDir: debianBin}, {Name: "B", BinDir: debianBin}}
	want := "target A: " + path + ":2: the scenario runs on PostgreSQL >=16, not on 15.18 (pg_stat_io is new in 16): measure builds of the versions it supports"
	err = Interleave(context.Background(), r, sc, targets, sc.Points()[0], Order{}, 1, func(int, *Sample) error {
		t.Error("a sample was measured")
		return nil
	})
	var ve *VersionError
	if !errors.As(err, &ve) || err.Error() != want {
		t.Fatalf("Interleave: %v, want a *VersionError %q", err, want)
	}
	_, err = r.Run(context.Background(), sc, targets[0], sc.Points()[0])
	if !errors.As(err, &ve) || ve.Version != "15.18" || ve.Supported != ">=16" {
		t.Fatalf("Run: %v, want a *VersionError", err)
	}
	r.Close(context.Background())
	if dirs := clusterDirs(t, state); len(dirs) != 0 {
		t.Errorf("clusters were made: %v", dirs)
	}
}
