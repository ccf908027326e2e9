package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

// fakeSys builds a directory shaped like / with the given kernel files.
func fakeSys(t *testing.T, files map[string]string) sysfs {
	t.Helper()
	root := t.TempDir()
	for f, v := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return sysfs{root: root, device: func(string) string { return "/sys/devices/virtual/block/vdb" }}
}

func (s sysfs) mustRead(t *testing.T, f string) string {
	t.Helper()
	v, ok := s.read(f)
	if !ok {
		t.Fatalf("%s is missing", f)
	}
	return v
}

const dev = "/sys/devices/virtual/block/vdb"

func TestReadOSRecordsWhatExistsAndOmitsTheRest(t *testing.T) {
	// A VM: no cpufreq, SMT not supported, intel_pstate absent.
	s := fakeSys(t, map[string]string{
		dev + "/queue/read_ahead_kb":          "8192",
		dev + "/queue/scheduler":              "none [mq-deadline] kyber bfq",
		dev + "/queue/rotational":             "1",
		"/proc/sys/vm/dirty_ratio":            "20",
		"/proc/sys/vm/dirty_bytes":            "0",
		"/sys/devices/system/cpu/smt/control": "notsupported",
	})
	o := s.readOS("/data")
	if o.Device != "vdb" || o.ReadaheadKB == nil || *o.ReadaheadKB != 8192 || o.Scheduler != "mq-deadline" || o.Rotational == nil || !*o.Rotational {
		t.Errorf("device settings: %+v", o)
	}
	if o.VM["dirty_ratio"] != 20 || len(o.VM) != 2 {
		t.Errorf("vm: %v", o.VM)
	}
	if o.SMT != "" || o.Boost != "" || o.Governor != "" {
		t.Errorf("absent settings recorded: smt %q boost %q governor %q", o.SMT, o.Boost, o.Governor)
	}

	// Bare metal with intel_pstate, SMT on, a governor.
	s = fakeSys(t, map[string]string{
		"/sys/devices/system/cpu/smt/control":                   "on",
		"/sys/devices/system/cpu/intel_pstate/no_turbo":         "1",
		"/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance",
	})
	s.device = func(string) string { return "" }
	o = s.readOS("/data")
	if o.Device != "" || o.ReadaheadKB != nil || o.SMT != "on" || o.Boost != "off" || o.Governor != "performance" {
		t.Errorf("bare metal: %+v", o)
	}
}

func TestApplyOSPutsEverythingBack(t *testing.T) {
	s := fakeSys(t, map[string]string{
		dev + "/queue/read_ahead_kb":          "128",
		dev + "/queue/scheduler":              "none [mq-deadline] kyber bfq",
		"/proc/sys/vm/dirty_ratio":            "20",
		"/proc/sys/vm/dirty_bytes":            "0",
		"/proc/sys/vm/dirty_background_ratio": "10",
		"/proc/sys/vm/dirty_background_bytes": "0",
	})
	ra := 4096
	spec := OSSpec{ReadaheadKB: &ra, Scheduler: "none", VM: map[string]int64{"dirty_bytes": 1 << 26}}
	restore := filepath.Join(t.TempDir(), "os-restore.json")
	changed, err := s.applyOS("/data", spec, restore)
	if err != nil {
		t.Fatal(err)
	}
	if v := s.mustRead(t, dev+"/queue/read_ahead_kb"); v != "4096" {
		t.Errorf("readahead %s", v)
	}
	if v := s.mustRead(t, dev+"/queue/scheduler"); v != "none" {
		t.Errorf("scheduler %s", v)
	}
	if _, err := os.Stat(restore); err != nil {
		t.Fatalf("no restore record while the settings are changed: %v", err)
	}
	// The kernel zeroes dirty_ratio when dirty_bytes is set.
	os.WriteFile(filepath.Join(s.root, "/proc/sys/vm/dirty_ratio"), []byte("0\n"), 0)

	// pgbisect is killed here: the next run puts the settings back from
	// the record.
	_ = changed
	if err := s.restoreOS(restore); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{dev + "/queue/read_ahead_kb": "128", dev + "/queue/scheduler": "mq-deadline",
		"/proc/sys/vm/dirty_ratio": "20"}
	for f, w := range want {
		if v := s.mustRead(t, f); v != w {
			t.Errorf("%s = %s after restore, want %s", f, v, w)
		}
	}
	// dirty_bytes stays as written: the real kernel zeroes it when
	// dirty_ratio is written, and refuses a 0 written to it.
	if _, err := os.Stat(restore); !os.IsNotExist(err) {
		t.Errorf("restore record left behind: %v", err)
	}
	if err := s.restoreOS(restore); err != nil {
		t.Errorf("restoring with no record: %v", err)
	}
}

func TestPlanOSRefusesWhatTheMachineCannotDo(t *testing.T) {
	s := fakeSys(t, map[string]string{dev + "/queue/scheduler": "[none] mq-deadline"})
	ra := 256
	cases := []struct {
		spec OSSpec
		want string
	}{
		{OSSpec{Scheduler: "bfq"}, `os.scheduler "bfq": device vdb offers none, mq-deadline`},
		{OSSpec{ReadaheadKB: &ra}, "device vdb has no read_ahead_kb setting"},
		{OSSpec{VM: map[string]int64{"dirty_ratio": 5}}, "this kernel has no vm.dirty_ratio"},
	}
	for _, c := range cases {
		if _, err := s.planOS("/data", c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.spec, err, c.want)
		}
	}
	s.device = func(string) string { return "" }
	if _, err := s.planOS("/dev/shm/x", OSSpec{ReadaheadKB: &ra}); err == nil || !strings.Contains(err.Error(), "on no block device") {
		t.Errorf("tmpfs: %v", err)
	}
}

func TestScenarioOSSection(t *testing.T) {
	base := "workload:\n  - sql: SELECT 1\nmetrics:\n  - {name: e, step: sql, value: elapsed}\n"
	sc, err := Load([]byte("os: {readahead_kb: 4096, scheduler: none, vm: {dirty_background_bytes: 16777216}}\n"+base), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *sc.OS.ReadaheadKB != 4096 || sc.OS.Scheduler != "none" || sc.OS.VM["dirty_background_bytes"] != 16777216 {
		t.Errorf("parsed %+v", sc.OS)
	}
	for y, want := range map[string]string{
		"os: {vm: {dirty_ration: 5}}\n": "t.yaml:1: vm.dirty_ration cannot be set by a scenario (did you mean dirty_ratio?)",
		"os: {readahead_kb: -1}\n":      "t.yaml:1: readahead_kb -1: use 0 (no readahead) or a size in kB",
		"os: {readahed_kb: 128}\n":      "readahead_kb",
		"os: {vm: {swappiness: 10}}\n":  "vm.swappiness cannot be set by a scenario",
	} {
		if _, err := Load([]byte(y+base), "t.yaml", nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", y, err, want)
		}
	}
}

// loopDisk mounts a small ext4 file system on a loop device and returns
// its mount point and device name, so that a test can change the device's
// settings without touching the machine's disk.
func loopDisk(t *testing.T) (mnt, name string) {
	t.Helper()
	need := func(err error, what string) {
		if err == nil {
			return
		}
		citest.Unavailable(t, "%s: %v (needs root, util-linux and e2fsprogs)", what, err)
	}
	if !proc.IsRoot() {
		need(fmt.Errorf("not root"), "loop device")
	}
	img := filepath.Join(t.TempDir(), "disk.img")
	need(os.WriteFile(img, nil, 0o600), "image")
	need(os.Truncate(img, 256<<20), "image")
	out, err := exec.Command("losetup", "-f", "--show", img).Output()
	need(err, "losetup")
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", loop).Run() })
	need(exec.Command("mkfs.ext4", "-q", loop).Run(), "mkfs.ext4")
	mnt, err = os.MkdirTemp("", "pgbisect-os-test-")
	need(err, "mount point")
	need(exec.Command("mount", loop, mnt).Run(), "mount")
	t.Cleanup(func() {
		exec.Command("umount", "-l", mnt).Run()
		os.Remove(mnt)
	})
	need(os.Chmod(mnt, 0o755), "chmod")
	return mnt, filepath.Base(loop)
}

// TestOSSettingsDuringASample runs a real sample whose scenario sets the
// readahead and I/O scheduler of its data directory's device (a loop
// device) and a vm.dirty setting: the workload sees them, the sample
// records them, and afterwards the machine has its own settings back.
func TestOSSettingsDuringASample(t *testing.T) {
	bin := pgBin(t)
	mnt, loop := loopDisk(t)
	r := &Runner{StateDir: mnt}
	u, err := proc.LookupUser(proc.BenchUser)
	if err != nil {
		t.Fatal(err)
	}
	r.RunAs = u
	queue := "/sys/block/" + loop + "/queue/"
	before := hostSys.readOS(mnt)
	if before.ReadaheadKB == nil || before.Device != loop {
		t.Fatalf("loop device settings not found: %+v", before)
	}
	bg, _ := hostSys.read("proc/sys/vm/dirty_expire_centisecs")
	newExpire, _ := strconv.Atoi(bg)
	newExpire++
	ra := *before.ReadaheadKB + 64
	y := fmt.Sprintf(`os:
  readahead_kb: %d
  scheduler: none
  vm: {dirty_expire_centisecs: %d}
workload:
  - {name: ra, shell: {argv: [cat, %sread_ahead_kb]}}
metrics:
  - {name: readahead, step: ra, value: scalar, direction: higher}
`, ra, newExpire, queue)
	sc, err := Load([]byte(y), "os.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	target := Target{Name: "pg15", BinDir: bin}
	if err := r.Check(context.Background(), sc, []Target{target}, Point{}); err != nil {
		t.Fatal(err)
	}
	s, err := r.Run(context.Background(), sc, target, Point{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	if got := s.Values["readahead"]; got != float64(ra) {
		t.Errorf("the workload saw read_ahead_kb %g, want %d", got, ra)
	}
	o := s.Env.OS
	if o.Device != loop || o.ReadaheadKB == nil || *o.ReadaheadKB != ra || o.Scheduler != "none" || o.VM["dirty_expire_centisecs"] != int64(newExpire) {
		t.Errorf("sample recorded %+v", o)
	}
	after := hostSys.readOS(mnt)
	if *after.ReadaheadKB != *before.ReadaheadKB || after.Scheduler != before.Scheduler || after.VM["dirty_expire_centisecs"] != before.VM["dirty_expire_centisecs"] {
		t.Errorf("settings not put back: before %+v, after %+v", before, after)
	}
	if _, err := os.Stat(r.osRestoreFile()); !os.IsNotExist(err) {
		t.Errorf("restore record left behind: %v", err)
	}
}

// TestWarmLifecycle keeps one running server per target across
// interleaved samples, checkpoints between samples, and an A/A comparison
// of two warm servers of the same build is "same".
func TestWarmLifecycle(t *testing.T) {
	bin := pgBin(t)
	r, _ := newTestRunner(t)
	ctx := context.Background()
	defer r.Close(ctx)
	sc, err := Load([]byte(`lifecycle: warm
setup:
  - sql: CREATE TABLE t AS SELECT g AS id, md5(g::text) AS s FROM generate_series(1, 600000) g
  - sql: VACUUM (FREEZE, ANALYZE) t
workload:
  - {name: scan, sql: "SELECT count(*) FROM t WHERE s LIKE '%ab%'"}
  - {name: started, sql: "SELECT extract(epoch FROM pg_postmaster_start_time())"}
  - {name: checkpoints, sql: "SELECT checkpoints_req FROM pg_stat_bgwriter"}
metrics:
  - {name: scan, step: scan, value: elapsed, unit: ms}
  - {name: started, step: started, value: scalar, record: true, direction: lower}
  - {name: checkpoints, step: checkpoints, value: scalar, record: true, direction: lower}
`), "warm.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Between) != 1 || sc.Between[0].SQL != "CHECKPOINT" {
		t.Fatalf("default between steps: %+v", sc.Between)
	}
	targets := []Target{{Name: "A", BinDir: bin}, {Name: "B", BinDir: bin}}
	th := stats.DefaultThresholds
	th.MinEffect = 0.15 // a 0.1 s query on a shared 2-core machine, 10-20% run-to-run noise
	th.StartSamples, th.Batch, th.MaxSamples = 10, 10, 80
	samples := map[string][]Sample{}
	values := func(name string) []float64 {
		var v []float64
		for _, s := range samples[name] {
			v = append(v, s.Values["scan"])
		}
		return v
	}
	var c stats.Comparison
	for n := 10; n <= 80; n += 10 {
		err := Interleave(ctx, r, sc, targets, Point{}, Order{}, 10, func(_ int, s *Sample) error {
			samples[s.Target] = append(samples[s.Target], *s)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if c = stats.Compare(values("A"), values("B"), stats.LowerIsBetter, th); c.Verdict.Decided() {
			break
		}
	}
	t.Logf("A %.0f\nB %.0f", values("A"), values("B"))
	if c.Verdict != stats.Same {
		t.Errorf("warm A/A comparison: %v %+.1f%% [%+.1f%%, %+.1f%%] (n=%d+%d), want same", c.Verdict,
			100*c.Change(), 100*(c.Lo-1), 100*(c.Hi-1), len(values("A")), len(values("B")))
	}
	for _, name := range []string{"A", "B"} {
		ss := samples[name]
		for i, s := range ss {
			if s.Values["started"] != ss[0].Values["started"] {
				t.Errorf("%s sample %d ran on a server started at %v, the first on one started at %v: the warm server was restarted", name, i, s.Values["started"], ss[0].Values["started"])
				break
			}
			if i > 0 && s.Values["checkpoints"] <= ss[i-1].Values["checkpoints"] {
				t.Errorf("%s sample %d: no checkpoint since the sample before (%v, then %v)", name, i, ss[i-1].Values["checkpoints"], s.Values["checkpoints"])
				break
			}
		}
	}
	if samples["A"][0].Values["started"] == samples["B"][0].Values["started"] {
		t.Error("A and B share one server")
	}
	for y, want := range map[string]string{
		"lifecycle: warm\ndrop_caches: true\n": "drop_caches restarts the server before every sample, which lifecycle warm keeps running",
		"between: [{sql: CHECKPOINT}]\n":       "between steps run on a warm server between samples: set lifecycle: warm",
	} {
		_, err := Load([]byte(y+"workload:\n  - sql: SELECT 1\nmetrics:\n  - {name: e, step: sql, value: elapsed}\n"), "w.yaml", nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", y, err, want)
		}
	}
}
