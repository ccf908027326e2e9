package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/build/buildtest"
	"github.com/pgbisect/pgbisect/internal/base/pgversion"
	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// releasesUpdate rewrites the sections of docs/releases.md of the releases
// TestReleases ran, from what their servers said.
var releasesUpdate = flag.Bool("releases.update", false, "rewrite the sections of ../docs/releases.md of the releases TestReleases ran (generated from the real servers)")

// releasesDoc is the generated table of what each release's server does
// with the shipped scenarios and the server statistics.
const releasesDoc = "../docs/releases.md"

// releaseStatsScenario takes every server statistic around one step that
// writes WAL and checkpoints, and around a pgbench run whose clients
// disconnect (so pg_stat_wal and pg_stat_io have their counts).
const releaseStatsScenario = insertStep + `  - name: bench
    pgbench:
      args: [-n, -c, "2", -t, "200"]
      script: |
        INSERT INTO t VALUES (1, 'x');
metrics:
  - {name: wal_bytes, step: insert, value: wal_bytes}
  - {name: wal_records, step: bench, value: wal_records}
  - {name: wal_fpi, step: bench, value: wal_fpi}
  - {name: wal_write, step: bench, value: wal_write}
  - {name: wal_sync, step: bench, value: wal_sync}
  - {name: buffers_backend, step: insert, value: buffers_backend}
  - {name: buffers_clean, step: insert, value: buffers_clean}
  - {name: buffers_checkpoint, step: insert, value: buffers_checkpoint}
  - {name: checkpoints, step: insert, value: checkpoints}
  - {name: io_reads, step: bench, value: io_reads}
  - {name: io_writes, step: insert, value: io_writes}
  - {name: io_extends, step: bench, value: io_extends}
  - {name: cpu_user, step: insert, value: cpu_user}
  - {name: cpu_system, step: insert, value: cpu_system}
  - {name: disk_write_bytes, step: insert, value: disk_write_bytes}
  - {name: wait_events, step: bench, value: wait_events}
`

// releaseSection is what one release's server did, rendered as a section
// of docs/releases.md.
type releaseSection struct {
	heading   string   // "## PostgreSQL 13.16 (configure)"
	scenarios []string // table rows
	stats     []string // table rows
	settings  string   // the versions.txt check, one line
	measured  []string // timings: not compared
}

func (s releaseSection) render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n%s\n\n", s.heading, s.settings)
	b.WriteString("| shipped scenario (tiny size) | on this release | settings as this server took them |\n|---|---|---|\n")
	for _, r := range s.scenarios {
		b.WriteString(r + "\n")
	}
	b.WriteString("\n| server statistic | on this release |\n|---|---|\n")
	for _, r := range s.stats {
		b.WriteString(r + "\n")
	}
	b.WriteString("\n")
	for _, m := range s.measured {
		b.WriteString(m + "\n")
	}
	return b.String()
}

// TestReleases runs every shipped scenario at a tiny size, one sample each,
// and every server statistic, on real builds of each release
// (buildtest.Releases: 15.18 and 18.6 always, 13.16 with
// PGBISECT_TEST_RELEASES=13), after checking bench/testdata/versions.txt
// against each server's own --describe-config, probe and initdb. A
// scenario a release cannot run must be refused by Check with a
// *VersionError before anything starts. The rendered tables must match
// docs/releases.md (rewrite it with -releases.update).
func TestReleases(t *testing.T) {
	vt := loadVersionTable(t)
	sections := map[string]releaseSection{}
	for _, rel := range buildtest.Releases {
		t.Run(rel.Name, func(t *testing.T) {
			inst := buildtest.Install(t, rel)
			bin := inst.BinDir()
			r, _ := newTestRunner(t)
			defer r.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			srv, err := DescribeServer(ctx, bin, r.RunAs)
			if err != nil {
				t.Fatal(err)
			}
			sec := releaseSection{heading: fmt.Sprintf("## PostgreSQL %s (%s)", srv.Version, inst.Options)}
			sec.settings = checkVersionTable(t, vt, srv, bin, r.RunAs)
			start := time.Now()
			for _, c := range tinyScenarios {
				sec.scenarios = append(sec.scenarios, runOnRelease(t, ctx, r, srv, bin, c))
			}
			scenarioWall := time.Since(start)
			sec.stats = statsOnRelease(t, ctx, r, srv, bin)
			sec.measured = append(sec.measured, fmt.Sprintf("Measured when generated: the %d scenarios in %s (one sample each, with their setup), load average %s.",
				len(tinyScenarios), scenarioWall.Round(time.Second), loadAverage()))
			sections[rel.Name] = sec
		})
	}
	// Every shipped scenario has a tiny case.
	files, _ := filepath.Glob("../configs/scenarios/*.yaml")
	for _, f := range files {
		found := false
		for _, c := range tinyScenarios {
			found = found || c.file == filepath.Base(f)
		}
		if !found {
			t.Errorf("%s has no tiny case in tinyScenarios: add one (a size that runs in seconds and what its sample must hold)", f)
		}
	}
	if len(sections) == 0 || t.Failed() {
		return
	}
	checkReleasesDoc(t, sections)
}

// checkVersionTable compares versions.txt with the server: every setting
// the table says the version has is in --describe-config and no other,
// every wal_level value is accepted or refused by the server's own check
// as the table says, and initdb takes the options the table says it has.
func checkVersionTable(t *testing.T, vt versionTable, srv *Server, bin string, u *proc.User) string {
	t.Helper()
	// The table's own range ends at 17: a later release must have what
	// 17 has.
	asOf := srv.Version
	if asOf.Num >= 180000 {
		asOf = pgversion.Version{Num: 170000}
	}
	n := 0
	for _, kind := range []string{"setting", "wal_level", "initdb"} {
		names := make([]string, 0, len(vt[kind]))
		for name := range vt[kind] {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			want := vt.has(kind, name, asOf)
			var got bool
			switch kind {
			case "setting":
				// --describe-config leaves out developer settings
				// (force_parallel_mode, debug_parallel_query): the
				// server's own check tells those apart from unknown ones.
				got = srv.Settings[name]
				if !got {
					rej := srv.Probe(context.Background(), map[string]string{name: "pgbisect-probe"})
					got = rej == nil || !rej.Unknown
				}
			case "wal_level":
				got = srv.Probe(context.Background(), map[string]string{"wal_level": name}) == nil
			case "initdb":
				got = initdbTakes(t, bin, u, name)
			}
			if got != want {
				t.Errorf("versions.txt: %s %s is %s on %s, but the server says %s", kind, name, have(want), srv.Version, have(got))
			}
			n++
		}
	}
	return fmt.Sprintf("`bench/testdata/versions.txt`: its %d settings, `wal_level` values and initdb options agree with this server's `--describe-config` (and, for developer settings it leaves out, its own check of `-c name=value`), its check of `-c wal_level=...` and its initdb.", n)
}

func have(b bool) string {
	if b {
		return "there"
	}
	return "absent"
}

// initdbTakes reports whether the install's initdb accepts the option:
// given the option (with a value where it takes one) and then one no
// initdb has, it must complain about the second, having accepted the
// first, and stop before doing anything.
func initdbTakes(t *testing.T, bin string, u *proc.User, opt string) bool {
	t.Helper()
	args := []string{opt}
	switch opt {
	case "-D", "-U", "-A", "-E", "--locale":
		args = append(args, "C")
	}
	args = append(args, "--pgbisect-no-such-option")
	out, _ := proc.Command(context.Background(), u, filepath.Join(bin, "initdb"), args...).CombinedOutput()
	s := string(out)
	if !strings.Contains(s, "pgbisect-no-such-option") {
		t.Fatalf("initdb %s: did not stop at the unknown option:\n%s", strings.Join(args, " "), s)
	}
	return !strings.Contains(s, "'"+opt+"'") && !strings.Contains(s, "-- '"+strings.TrimPrefix(opt, "-")+"'")
}

// runOnRelease runs one tiny scenario on the release (one sample), or
// checks that Check refuses it up front, and returns its table row.
func runOnRelease(t *testing.T, ctx context.Context, r *Runner, srv *Server, bin string, c tinyScenario) string {
	t.Helper()
	sc, err := LoadFileWith(filepath.Join("../configs/scenarios", c.file), c.overrides)
	if err != nil {
		t.Fatal(err)
	}
	target := Target{Name: srv.Version.String(), BinDir: bin}
	pt := sc.Points()[0]
	notes := "—"
	if exp, err := sc.expand(pt, placeholderRuntime); err == nil {
		own := map[string]string{"port": "5432", "listen_addresses": "", "unix_socket_directories": "/tmp", "unix_socket_permissions": "0700"}
		if res, err := srv.Resolve(ctx, exp.settings, exp.byVersion, own); err == nil && len(res.Notes) > 0 {
			notes = strings.Join(res.Notes, "; ")
		}
	}
	err = r.Check(ctx, sc, []Target{target}, pt)
	if !sc.SupportsVersion(srv.Version) {
		var ve *VersionError
		if !errors.As(err, &ve) {
			t.Errorf("%s on %s: Check = %v, want a *VersionError", c.file, srv.Version, err)
		}
		return fmt.Sprintf("| `%s` | refused before measuring: needs %s (%s) | — |", c.file, sc.Versions.Supported, sc.Versions.Why)
	}
	if err != nil {
		t.Errorf("%s on %s: Check: %v", c.file, srv.Version, err)
		return fmt.Sprintf("| `%s` | FAILS: %v | |", c.file, err)
	}
	start := time.Now()
	s, err := r.Run(ctx, sc, target, pt)
	if err != nil {
		t.Errorf("%s on %s: %v", c.file, srv.Version, err)
		return fmt.Sprintf("| `%s` | FAILS: %v | |", c.file, err)
	}
	t.Run(c.file, func(t *testing.T) { c.check(t, s) })
	t.Logf("%s on %s: one sample in %s: %v", c.file, srv.Version, time.Since(start).Round(time.Millisecond), s.Values)
	metrics := make([]string, 0, len(s.Values))
	for m := range s.Values {
		metrics = append(metrics, m)
	}
	sort.Strings(metrics)
	return fmt.Sprintf("| `%s` | runs: %s | %s |", c.file, strings.Join(metrics, ", "), notes)
}

// statsOnRelease takes every server statistic on the release and checks
// which the version has: measured, or skipped with its note.
func statsOnRelease(t *testing.T, ctx context.Context, r *Runner, srv *Server, bin string) []string {
	t.Helper()
	sc, err := Load([]byte(releaseStatsScenario), "serverstats.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Run(ctx, sc, Target{Name: srv.Version.String(), BinDir: bin}, Point{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("statistics on %s: %v; warnings %q", srv.Version, s.Values, s.Env.Warnings)
	v := srv.Version.Num
	// What each version has (docs/scenarios.md, "Server statistics").
	expect := map[string]bool{
		"wal_records": v >= 140000, "wal_fpi": v >= 140000,
		"wal_write": v >= 140000 && v < 180000, "wal_sync": v >= 140000 && v < 180000,
		"io_reads": v >= 160000, "io_writes": v >= 160000, "io_extends": v >= 160000,
	}
	var rows []string
	for _, m := range sc.metrics {
		val, ok := s.Values[m.Name]
		note := ""
		for _, w := range s.Env.Warnings {
			if rest, found := strings.CutPrefix(w, "metric "+m.Name+" skipped: "); found {
				note = rest
			}
		}
		want, versioned := expect[m.Name]
		switch {
		case m.Name == "disk_write_bytes":
			// The machine's, not the version's: an overlay or tmpfs
			// data directory has no block device. The row says so either
			// way, so the table does not depend on the machine.
			if !ok && note == "" {
				t.Errorf("%s on %s: skipped without a note", m.Name, srv.Version)
			}
			t.Logf("%s on %s: measured %v (%v), note %q", m.Name, srv.Version, ok, val, note)
			rows = append(rows, fmt.Sprintf("| `%s` | measured where the data directory is on a block device (/proc/diskstats); skipped with a note elsewhere |", m.Name))
			continue
		case versioned && ok != want, !versioned && !ok:
			t.Errorf("%s on %s: measured %v (%v), want %v; note %q", m.Name, srv.Version, ok, val, !versioned || want, note)
		case !ok && note == "":
			t.Errorf("%s on %s: skipped without a note", m.Name, srv.Version)
		}
		// Counters that must move under the step.
		switch m.Name {
		case "wal_bytes", "buffers_checkpoint", "checkpoints", "wal_records":
			if ok && !(val > 0) {
				t.Errorf("%s on %s = %v, want > 0", m.Name, srv.Version, val)
			}
		case "buffers_backend":
			// The INSERT extends the table by about 345 pages on every
			// release: what the backend wrote or extended.
			if !(val > 300) {
				t.Errorf("buffers_backend on %s = %v, want the ~345 pages the INSERT extended", srv.Version, val)
			}
		}
		if ok {
			rows = append(rows, fmt.Sprintf("| `%s` | measured (%s) |", m.Name, statSource(m.Name, v)))
		} else {
			rows = append(rows, fmt.Sprintf("| `%s` | skipped, with the note \"%s\" |", m.Name, note))
		}
	}
	return rows
}

// statSource names where serverstats.go reads a statistic on a version.
func statSource(name string, v int) string {
	if sv, ok := serverValues[name]; ok && sv.query != nil {
		if sql, _ := sv.query(v); sql != "" {
			return "`" + sql + "`"
		}
	}
	switch name {
	case "cpu_user", "cpu_system":
		return "/proc of the postmaster and its children"
	case "disk_write_bytes":
		return "/proc/diskstats"
	case "wait_events":
		return "`pg_stat_activity`, sampled"
	}
	return "?"
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// checkReleasesDoc compares (or, with -releases.update, rewrites) the
// sections of docs/releases.md of the releases run: their tables, not the
// timings.
func checkReleasesDoc(t *testing.T, sections map[string]releaseSection) {
	t.Helper()
	data, err := os.ReadFile(releasesDoc)
	if err != nil && !*releasesUpdate {
		t.Fatalf("%v: generate it with go test ./bench -run TestReleases -args -releases.update", err)
	}
	doc := parseReleasesDoc(string(data))
	stale := false
	for _, rel := range buildtest.Releases {
		sec, ok := sections[rel.Name]
		if !ok {
			continue
		}
		got := sec.render()
		if tables(doc.sections[sec.heading]) != tables(got) {
			stale = true
			if !*releasesUpdate {
				t.Errorf("%s: the section %q differs from what the server says now:\n%s\nrerun with -args -releases.update (PGBISECT_TEST_RELEASES=13 for 13's)", releasesDoc, sec.heading, got)
			}
		}
		doc.set(sec.heading, got)
	}
	if *releasesUpdate && (stale || data == nil) {
		if err := os.WriteFile(releasesDoc, []byte(doc.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", releasesDoc)
	}
}

// releasesDocHeader opens docs/releases.md.
const releasesDocHeader = `# What each PostgreSQL release does with the shipped scenarios (generated)

Generated by ` + "`bench` `TestReleases`" + ` from real builds of each release (Debian's source
packages, built by pgbisect: ` + "`build/buildtest`" + `), never by hand: rewrite a release's section with
` + "`go test ./bench -run TestReleases -args -releases.update`" + ` (add ` + "`PGBISECT_TEST_RELEASES=13`" + `
for 13.16, an opt-in build). CI runs the test on 15.18 and 18.6 and fails when their sections
differ from what the servers say; the timings under each section are from the run that wrote it.
Each scenario ran at a tiny size (` + "`tinyScenarios` in bench/runner_test.go" + `), one sample, with the
checks of ` + "`TestShippedScenariosTiny`" + `. docs/scenarios.md describes the format and the statistics.

`

type releasesDocument struct {
	order    []string
	sections map[string]string
}

func parseReleasesDoc(s string) *releasesDocument {
	d := &releasesDocument{sections: map[string]string{}}
	var cur string
	var b strings.Builder
	flush := func() {
		if cur != "" {
			d.sections[cur] = b.String()
		}
	}
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.HasPrefix(line, "## ") {
			flush()
			cur = strings.TrimSpace(line)
			d.order = append(d.order, cur)
			b.Reset()
		}
		if cur != "" {
			b.WriteString(line)
		}
	}
	flush()
	return d
}

func (d *releasesDocument) set(heading, text string) {
	if _, ok := d.sections[heading]; !ok {
		d.order = append(d.order, heading)
		sort.SliceStable(d.order, func(i, j int) bool { return versionOfHeading(d.order[i]) < versionOfHeading(d.order[j]) })
	}
	d.sections[heading] = text
}

func versionOfHeading(h string) int {
	f := strings.Fields(h)
	if len(f) < 3 {
		return 0
	}
	v, _ := pgversion.Parse(f[2])
	return v.Num
}

func (d *releasesDocument) String() string {
	var b strings.Builder
	b.WriteString(releasesDocHeader)
	for _, h := range d.order {
		b.WriteString(strings.TrimRight(d.sections[h], "\n") + "\n\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// tables keeps a section's headings, text and table rows, without the
// timings.
func tables(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "Measured when generated:") || strings.TrimSpace(line) == "" {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
