package profile

import (
	"bytes"
	"context"
	"encoding/xml"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pgbisect/pgbisect/internal/testkit/citest"
)

const script = `postgres 4242/4242 
	  55d0c1a2b3c4 hash_bytes+0x1c (/usr/lib/postgresql/15/bin/postgres)
	  55d0c1a2b400 hashtext (/usr/lib/postgresql/15/bin/postgres)
	  55d0c1a2b500 ExecInterpExpr (/usr/lib/postgresql/15/bin/postgres)

postgres 4242/4242 
	  55d0c1a2b3c4 hash_bytes (/usr/lib/postgresql/15/bin/postgres)
	  7f0000001000 [unknown] ([unknown])

postgres 4242/4242 
	  7f00000020aa __memcpy_avx_unaligned_erms (/usr/lib/x86_64-linux-gnu/libc.so.6)
	  55d0c1a2b600 [unknown] (/usr/lib/postgresql/15/bin/postgres)

postgres 4243/4243 
	  7f0000001000 [unknown] ([unknown])
`

func TestParseScript(t *testing.T) {
	p, err := ParseScript(strings.NewReader(script), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"ExecInterpExpr;hashtext;hash_bytes":     1,
		"hash_bytes":                             1,
		"[postgres];__memcpy_avx_unaligned_erms": 1,
		"[unknown]":                              1,
	}
	if p.Samples != 4 || len(p.Stacks) != len(want) {
		t.Fatalf("samples %d stacks %v, want 4 in %v", p.Samples, p.Stacks, want)
	}
	for k, n := range want {
		if p.Stacks[k] != n {
			t.Errorf("stack %q: %d, want %d", k, p.Stacks[k], n)
		}
	}
	sh := p.Shares()
	if sh["hash_bytes"] != (Share{Self: 0.5, Inclusive: 0.5}) || sh["hashtext"] != (Share{Self: 0, Inclusive: 0.25}) {
		t.Errorf("shares: hash_bytes %+v hashtext %+v", sh["hash_bytes"], sh["hashtext"])
	}
	var buf bytes.Buffer
	if err := p.Folded(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "ExecInterpExpr;hashtext;hash_bytes 1\n") {
		t.Errorf("folded:\n%s", buf.String())
	}
}

func TestSharesCountRecursionOnce(t *testing.T) {
	p := Profile{Stacks: map[string]int{"main;f;g;f": 3, "main;h": 1}, Samples: 4}
	sh := p.Shares()
	if sh["f"].Inclusive != 0.75 || sh["f"].Self != 0.75 || sh["main"].Inclusive != 1 || sh["g"].Self != 0 {
		t.Errorf("shares: %+v", sh)
	}
}

// runs makes n profiles where "grow" has the given self share (with
// noise) and "other" the rest.
func runs(rng *rand.Rand, n int, share float64) []Profile {
	var ps []Profile
	for i := 0; i < n; i++ {
		g := int(1000 * (share + 0.02*rng.NormFloat64()))
		ps = append(ps, Profile{Stacks: map[string]int{"main;grow": g, "main;other": 1000 - g}, Samples: 1000})
	}
	return ps
}

func TestCompare(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	d := Compare(runs(rng, 5, 0.10), runs(rng, 5, 0.30))
	if d.BaseRuns != 5 || d.CulpritRuns != 5 || len(d.Warnings) != 0 {
		t.Fatalf("diff: %+v", d)
	}
	top := d.TopGrowers(3, false)
	if len(top) != 1 || top[0].Function != "grow" {
		t.Fatalf("top self growers: %+v, want grow alone", top)
	}
	if math.Abs(top[0].Self-0.20) > 0.04 || top[0].PSelf > 0.01 {
		t.Errorf("grow: self change %.3f p %.4f, want ~0.20 and p < 0.01", top[0].Self, top[0].PSelf)
	}
	if math.Abs(d.MinP-2.0/252) > 1e-12 {
		t.Errorf("min p with 5 and 5 runs: %v, want 2/252", d.MinP)
	}
	var buf bytes.Buffer
	d.WriteTable(&buf, 5)
	if !strings.Contains(buf.String(), "grow") || !strings.Contains(buf.String(), "pt  0.008") {
		t.Errorf("table:\n%s", buf.String())
	}

	// No difference: the growth found is noise, and the rank test says so.
	d = Compare(runs(rng, 5, 0.2), runs(rng, 5, 0.2))
	for _, c := range d.Changes {
		if c.Function == "grow" && c.PSelf < 0.01 {
			t.Errorf("equal sides: grow p = %v", c.PSelf)
		}
	}

	// Three runs a side cannot be sure, and a run without samples is left out.
	d = Compare(runs(rng, 3, 0.1), append(runs(rng, 3, 0.3), Profile{Warning: "perf is not installed"}))
	if d.CulpritRuns != 3 || len(d.Warnings) != 2 || !strings.Contains(d.Warnings[0], "perf is not installed") || !strings.Contains(d.Warnings[1], "smallest possible p is 0.10") {
		t.Errorf("warnings: %q", d.Warnings)
	}
	if d := Compare(nil, runs(rng, 3, 0.3)); len(d.Changes) != 0 || len(d.Warnings) == 0 {
		t.Errorf("no base runs: %+v", d)
	}
}

func TestFlameGraphSVG(t *testing.T) {
	base := Profile{Stacks: map[string]int{"main;grow": 10, "main;other": 90}, Samples: 100}
	culprit := Profile{Stacks: map[string]int{"main;grow": 50, "main;other": 50}, Samples: 100}
	var buf bytes.Buffer
	if err := FlameGraphSVG(&buf, "a <b> c", base, culprit); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		G []struct {
			Title string `xml:"title"`
			Rect  struct {
				Fill  string `xml:"fill,attr"`
				Width string `xml:"width,attr"`
			} `xml:"rect"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, buf.String())
	}
	fills := map[string]string{}
	for _, g := range doc.G {
		fills[strings.SplitN(g.Title, ":", 2)[0]] = g.Rect.Fill
	}
	if fills["grow"] != "rgb(255,55,55)" || fills["other"] != "rgb(55,55,255)" || fills["main"] != "rgb(255,255,255)" {
		t.Errorf("colours: %v", fills)
	}
}

func TestRecorderWithoutPerf(t *testing.T) {
	rec := Recorder{Perf: "/nonexistent/perf"}.Start(context.Background(), []int{os.Getpid()})
	p := rec.Stop(context.Background())
	if p.Samples != 0 || !strings.Contains(p.Warning, "perf is not installed") {
		t.Errorf("profile without perf: %+v", p)
	}
}

// TestRecorderPerfRefuses runs a perf that fails the way perf does
// without permission: the profile says so, and nothing fails.
func TestRecorderPerfRefuses(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "perf")
	body := "#!/bin/sh\necho 'Error: Access to performance monitoring and observability operations is limited.' >&2\nexit 255\n"
	if err := os.WriteFile(fake, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	p := Recorder{Perf: fake, Dir: dir}.Start(context.Background(), []int{os.Getpid()}).Stop(context.Background())
	if p.Samples != 0 || !strings.Contains(p.Warning, "perf record failed") || !strings.Contains(p.Warning, "Access to performance monitoring") {
		t.Errorf("refused perf: %+v", p)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind in %s: %v", dir, entries)
	}
}

// TestParseScriptKeepsTheServersProcesses keeps samples of the roots and
// of processes they forked (even grandchildren), not of other processes.
func TestParseScriptKeepsTheServersProcesses(t *testing.T) {
	out := `postgres     0/0     PERF_RECORD_FORK(200:200):(100:100)
postgres     0/0     PERF_RECORD_COMM: postgres:200/200
postgres     0/0     PERF_RECORD_FORK(300:300):(200:200)
postgres 100/100 
	  1 ServerLoop (/pg/bin/postgres)

postgres 200/200 
	  1 hash_bytes (/pg/bin/postgres)

postgres 300/300 
	  1 ParallelWorkerMain (/pg/bin/postgres)

postgres 999/999 
	  1 someoneElses (/other/bin/postgres)
`
	p, err := ParseScript(strings.NewReader(out), []int{100})
	if err != nil {
		t.Fatal(err)
	}
	if p.Samples != 3 || p.Stacks["someoneElses"] != 0 || p.Stacks["hash_bytes"] != 1 || p.Stacks["ParallelWorkerMain"] != 1 {
		t.Errorf("filtered: %+v", p)
	}
	if all, _ := ParseScript(strings.NewReader(out), nil); all.Samples != 4 {
		t.Errorf("unfiltered: %d samples, want 4", all.Samples)
	}
}

// TestRecorderCancelled stops a recording whose run was cancelled: perf
// is killed, nothing is symbolised, and a warning says so.
func TestRecorderCancelled(t *testing.T) {
	citest.Tool(t, "perf", "apt-get install linux-perf")
	citest.Root(t, "perf records the whole machine")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	rec := Recorder{Dir: dir}.Start(ctx, []int{os.Getpid()})
	if rec.warning != "" {
		t.Fatalf("perf did not start: %s", rec.warning)
	}
	cancel()
	p := rec.Stop(ctx)
	if p.Samples != 0 || !strings.Contains(p.Warning, "cancelled") {
		t.Errorf("cancelled: %+v", p)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
	if err := syscall.Kill(rec.cmd.Process.Pid, 0); err == nil {
		t.Errorf("perf %d still runs", rec.cmd.Process.Pid)
	}
}

// TestRecorderRecordsThisProcess records the test's own busy loop with
// real perf: the samples are kept by the process filter and most are in
// the test binary.
func TestRecorderRecordsThisProcess(t *testing.T) {
	citest.Tool(t, "perf", "apt-get install linux-perf")
	citest.Root(t, "perf records the whole machine")
	rec := Recorder{Dir: t.TempDir()}.Start(context.Background(), []int{os.Getpid()})
	x := 0
	for i := 0; i < 400_000_000; i++ {
		x += i % 7
	}
	p := rec.Stop(context.Background())
	if p.Warning != "" || p.Samples < 10 || x == 0 {
		t.Fatalf("profile of a busy loop: %d samples, warning %q", p.Samples, p.Warning)
	}
	// go test's binary has no symbol table perf reads, so its frames are
	// "[profile.test]": the loop's samples are those.
	own := 0
	for stack, n := range p.Stacks {
		frames := strings.Split(stack, ";")
		if leaf := frames[len(frames)-1]; leaf == "[profile.test]" || strings.Contains(leaf, "TestRecorderRecordsThisProcess") {
			own += n
		}
	}
	if float64(own) < 0.5*float64(p.Samples) {
		t.Errorf("%d of %d samples in the test binary; stacks: %v", own, p.Samples, p.Stacks)
	}

}
