package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// Instruction counts are a metric (value: instructions) that barely moves
// from run to run, where elapsed time wobbles by percents: the
// instructions the server executed while it served one step. The design
// choice that matters: the step runs in a session of its own, so the
// processes that served it are exactly the ones born for it (its backend,
// its parallel workers, the sessions of a pgbench or shell step), and
// the server's background processes (checkpointer, background writer,
// WAL writer, autovacuum launcher) never count. Two counters:
//
//   - perf (hardware counters, user-space instructions: perf stat -e
//     instructions:u), attached to the step's own backend for the step
//     alone. perf cannot follow processes forked after it attached, so
//     parallel workers are not counted, and pgbench and shell steps,
//     whose sessions start during the step, cannot be counted with perf.
//   - valgrind (cachegrind --cache-sim=no), in software on any machine:
//     the server of the sample is started under valgrind, which follows
//     the backends the postmaster forks, and writes one file per process
//     when it exits; a step's count is the sum over the processes born
//     during it, each from its fork to its exit (connection start-up and
//     exit included: valgrind 3.19 cannot start or stop counting inside a
//     process). It runs the server ~30-50x slower.
//
// Samples record the counter that produced them (Environment.Counter);
// counts of different counters are never compared (CheckCounter).

// Counter values of a scenario's counter key.
const (
	// CounterAuto is perf where the machine has hardware counters, else
	// valgrind.
	CounterAuto     = "auto"
	CounterPerf     = "perf"
	CounterValgrind = "valgrind"
)

// perfEvent is the event the perf counter counts. Tests on machines
// without hardware counters swap in a software event to drive the perf
// path for real.
var perfEvent = "instructions:u"

// resolveCounter picks the counter a scenario's counter key names on this
// machine, or says what to install.
func resolveCounter(ctx context.Context, want string) (string, error) {
	perfOK, perfWhy := perfCounts(ctx)
	_, vgErr := exec.LookPath("valgrind")
	switch want {
	case CounterPerf:
		if !perfOK {
			return "", fmt.Errorf("counter perf: %s; use counter: valgrind (apt-get install valgrind) or counter: auto", perfWhy)
		}
		return CounterPerf, nil
	case CounterValgrind:
		if vgErr != nil {
			return "", errors.New("counter valgrind: valgrind is not installed: apt-get install valgrind")
		}
		return CounterValgrind, nil
	}
	if perfOK {
		return CounterPerf, nil
	}
	if vgErr == nil {
		return CounterValgrind, nil
	}
	return "", fmt.Errorf("no instruction counter on this machine: %s, and valgrind is not installed: apt-get install valgrind (or, on a machine with hardware counters, apt-get install linux-perf)", perfWhy)
}

// perfCounts reports whether perf can count perfEvent here, and if not,
// why.
func perfCounts(ctx context.Context) (bool, string) {
	path, err := exec.LookPath("perf")
	if err != nil {
		return false, "perf is not installed"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "stat", "-x", ",", "-e", perfEvent, "true")
	cmd.Env = proc.Env()
	out, err := cmd.CombinedOutput()
	if _, ok := parsePerfStat(string(out)); ok && err == nil {
		return true, ""
	}
	line := strings.TrimSpace(proc.Tail(strings.TrimSpace(string(out)), 1))
	if strings.Contains(line, "<not supported>") {
		return false, fmt.Sprintf("this machine has no hardware counters (perf stat -e %s: not supported)", perfEvent)
	}
	return false, fmt.Sprintf("perf stat -e %s failed: %s", perfEvent, line)
}

// parsePerfStat reads the count of perf stat -x, output: the first field
// of the first line that has a number there ("<not supported>" has none).
func parsePerfStat(out string) (float64, bool) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(line), ",")
		if len(f) < 3 || f[0] == "" || strings.HasPrefix(f[0], "#") {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			return v, isCount(v)
		}
	}
	return 0, false
}

// isCount reports whether v can be a count of instructions: the files
// counted are written where a patched server runs, and a NaN, an infinity
// or a negative number would poison every statistic it entered.
func isCount(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

// parseCachegrind reads the Ir total of a cachegrind output file (its
// "summary:" line; --cache-sim=no counts instructions only).
func parseCachegrind(data []byte) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "summary:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil || !isCount(v) {
				return 0, fmt.Errorf("the summary line's %q is not a count of instructions", clipField(f[0]))
			}
			return v, nil
		}
	}
	return 0, errors.New("no summary line (did the process exit normally?)")
}

// clipField shortens a field an error quotes.
func clipField(s string) string {
	if len(s) > 40 {
		return strings.ToValidUTF8(s[:40], "") + "..."
	}
	return s
}

// CheckCounter refuses to compare instruction counts of two counters:
// perf counts user-space instructions on the hardware, valgrind counts
// instructions of its own translation, connection start-up included, so
// their numbers differ by more than any regression. first is the
// environment of the samples taken so far, next that of a new one.
func CheckCounter(first, next Environment) error {
	if first.Counter == next.Counter {
		return nil
	}
	name := func(c string) string {
		if c == "" {
			return "no counter (time only)"
		}
		return c
	}
	return fmt.Errorf("samples counted by %s cannot be compared with samples counted by %s: measure every side with one counter (the scenario's counter: perf or counter: valgrind, on one machine class)", name(next.Counter), name(first.Counter))
}

// counted is whether the scenario has instruction metrics.
func (s *Scenario) counted() bool {
	return slices.ContainsFunc(s.metrics, func(m Metric) bool { return m.Value == "instructions" })
}

// countedSteps are the workload steps with an instructions metric.
func (s *Scenario) countedSteps() map[string]bool {
	out := map[string]bool{}
	for _, m := range s.metrics {
		if m.Value == "instructions" {
			out[m.Step] = true
		}
	}
	return out
}

// counter returns the counter of this Runner for the scenario's counter
// key, deciding once per key.
func (r *Runner) counter(ctx context.Context, sc *Scenario) (string, error) {
	want := sc.Counter
	if c, ok := r.counters[want]; ok {
		return c, nil
	}
	c, err := resolveCounter(ctx, want)
	if err != nil {
		return "", err
	}
	if r.counters == nil {
		r.counters = map[string]string{}
	}
	r.counters[want] = c
	return c, nil
}

// startValgrind starts the cluster's server under valgrind cachegrind,
// writing one output file per process into a new counter directory for
// this start (a pid of an earlier start may come again, and the earlier
// postmaster writes its own file after pg_ctl saw it stop: it removes
// postmaster.pid before valgrind's exit).
func (c *cluster) startValgrind(ctx context.Context, timeout time.Duration) error {
	vg, err := exec.LookPath("valgrind")
	if err != nil {
		return errors.New("counter valgrind: valgrind is not installed: apt-get install valgrind")
	}
	if c.counterStarts > 0 {
		_ = os.RemoveAll(c.counterDir()) // best effort: see above
	}
	c.counterStarts++
	dir := c.counterDir()
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("creating the counter directory: %w", err)
	}
	if err := proc.Chown(dir, c.user); err != nil {
		return fmt.Errorf("giving %s to the server's user: %w", dir, err)
	}
	// pg_ctl runs the wrapper in place of postgres (pg_ctl -p). valgrind's
	// own messages go to files of their own, not the server log.
	script := fmt.Sprintf("#!/bin/sh\nexec %s --tool=cachegrind --cache-sim=no --cachegrind-out-file=%s/cg.%%p --log-file=%s/vg.%%p %s \"$@\"\n",
		shellQuote(vg), shellQuote(dir), shellQuote(dir), shellQuote(filepath.Join(c.binDir, "postgres")))
	if err := c.pg.WriteFile(c.dir, "postgres-valgrind", script, 0o755); err != nil {
		return err
	}
	c.pg.Postgres = filepath.Join(c.dir, "postgres-valgrind")
	defer func() { c.pg.Postgres = "" }()
	// Under valgrind the server starts ~5 s late, more on a busy machine.
	return c.start(ctx, max(timeout, 2*time.Minute))
}

func (c *cluster) counterDir() string {
	return filepath.Join(c.dir, "counter-"+strconv.Itoa(c.counterStarts))
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// countProbe counts the instructions of one step.
type countProbe struct {
	counter string
	c       *cluster
	pm      int
	known   map[int]bool // the postmaster and its children before the step
	files   map[string]bool
	perf    *perfStat
}

// startCount starts counting a step whose session (conn, a new one for
// the step, nil for pgbench and shell steps) is open.
func startCount(ctx context.Context, counter string, c *cluster, conn *pgx.Conn, kind string) (*countProbe, error) {
	p := &countProbe{counter: counter, c: c, pm: c.postmasterPID()}
	if p.pm <= 0 {
		return nil, fmt.Errorf("instructions: no postmaster.pid in %s", c.dataDir)
	}
	switch counter {
	case CounterValgrind:
		p.known = map[int]bool{p.pm: true}
		for _, k := range children(p.pm) {
			p.known[k] = true
		}
		if conn != nil {
			// The step's own backend, born for it, counts.
			var pid int
			if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				return nil, fmt.Errorf("instructions: %w", err)
			}
			delete(p.known, pid)
		}
		p.files = p.listFiles()
		return p, nil
	case CounterPerf:
		if conn == nil {
			return nil, fmt.Errorf("instructions: perf counts the step's own session and cannot follow the sessions a %s step opens: use counter: valgrind", kind)
		}
		var pid int
		if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			return nil, fmt.Errorf("instructions: %w", err)
		}
		ps, err := startPerfStat(ctx, pid)
		if err != nil {
			return nil, err
		}
		p.perf = ps
		return p, nil
	}
	return nil, fmt.Errorf("instructions: unknown counter %q", counter)
}

func (p *countProbe) listFiles() map[string]bool {
	out := map[string]bool{}
	entries, _ := os.ReadDir(p.c.counterDir())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "cg.") {
			out[e.Name()] = true
		}
	}
	return out
}

// finish ends the count once the step and its session are over, and
// returns the instructions and the number of processes counted.
func (p *countProbe) finish(ctx context.Context) (float64, int, error) {
	if p.perf != nil {
		v, err := p.perf.stop(ctx)
		return v, 1, err
	}
	// Wait for every process born during the step to exit: valgrind
	// writes a process's file as it exits.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		alive := 0
		for _, k := range children(p.pm) {
			if !p.known[k] {
				alive++
			}
		}
		if alive == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("instructions: %d server processes of the step still run 2 minutes after it ended", alive)
		}
		select {
		case <-ctx.Done():
			return 0, 0, context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
	var sum float64
	n := 0
	for name := range p.listFiles() {
		pid, err := strconv.Atoi(strings.TrimPrefix(name, "cg."))
		if p.files[name] || err != nil || p.known[pid] {
			continue
		}
		data, err := p.c.pg.ReadFile(filepath.Join(p.c.counterDir(), name))
		if err != nil {
			return 0, 0, fmt.Errorf("instructions: %w", err)
		}
		v, err := parseCachegrind(data)
		if err != nil {
			return 0, 0, fmt.Errorf("instructions: %s: %w", name, err)
		}
		sum += v
		n++
	}
	if n == 0 {
		return 0, 0, errors.New("instructions: valgrind wrote no count for the step's processes (is the server running under valgrind?)")
	}
	return sum, n, nil
}

// perfStat is perf stat attached to one backend, started disabled and
// enabled through its control fifo, whose acknowledgement says the
// counter runs: no sleep, no lost start.
type perfStat struct {
	dir    string
	cmd    *exec.Cmd
	ctl    *os.File
	ack    *bufio.Reader
	ackF   *os.File
	out    string
	stderr bytes.Buffer
}

func startPerfStat(ctx context.Context, pid int) (*perfStat, error) {
	path, err := exec.LookPath("perf")
	if err != nil {
		return nil, errors.New("counter perf: perf is not installed: apt-get install linux-perf")
	}
	dir, err := os.MkdirTemp("", "pgbisect-perfstat-")
	if err != nil {
		return nil, err
	}
	ps := &perfStat{dir: dir, out: filepath.Join(dir, "stat.csv")}
	ctl, ack := filepath.Join(dir, "ctl"), filepath.Join(dir, "ack")
	for _, f := range []string{ctl, ack} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			ps.cleanup()
			return nil, fmt.Errorf("instructions: %w", err)
		}
	}
	ps.cmd = exec.Command(path, "stat", "-x", ",", "-e", perfEvent, "-p", strconv.Itoa(pid), "-o", ps.out,
		"-D", "-1", "--control", "fifo:"+ctl+","+ack)
	ps.cmd.Env = proc.Env()
	ps.cmd.Stderr = &ps.stderr
	ps.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := ps.cmd.Start(); err != nil {
		ps.cleanup()
		return nil, fmt.Errorf("instructions: starting perf: %w", err)
	}
	// O_RDWR so that opening a fifo never blocks on perf's side.
	if ps.ctl, err = os.OpenFile(ctl, os.O_RDWR, 0); err == nil {
		ps.ackF, err = os.OpenFile(ack, os.O_RDWR, 0)
	}
	if err == nil {
		ps.ack = bufio.NewReader(ps.ackF)
		err = ps.command(ctx, "enable")
	}
	if err != nil {
		ps.kill()
		return nil, fmt.Errorf("instructions: perf stat: %w (%s)", err, strings.TrimSpace(ps.stderr.String()))
	}
	return ps, nil
}

// command sends a control command and waits for perf's ack.
func (ps *perfStat) command(ctx context.Context, cmd string) error {
	if _, err := ps.ctl.WriteString(cmd + "\n"); err != nil {
		return err
	}
	got := make(chan error, 1)
	go func() {
		line, err := ps.ack.ReadString('\n')
		// perf writes "ack\n\x00" (the string's NUL too).
		if err == nil && strings.Trim(line, "\x00 \n") != "ack" {
			err = fmt.Errorf("perf answered %q", line)
		}
		got <- err
	}()
	select {
	case err := <-got:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("perf did not acknowledge %q within 30s", cmd)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// stop disables the counter, ends perf and reads the count.
func (ps *perfStat) stop(ctx context.Context) (float64, error) {
	defer ps.cleanup()
	if err := ps.command(ctx, "disable"); err != nil {
		ps.kill()
		return 0, fmt.Errorf("instructions: perf stat: %w", err)
	}
	_ = ps.cmd.Process.Signal(syscall.SIGINT)
	_ = ps.cmd.Wait()
	data, err := os.ReadFile(ps.out)
	if err != nil {
		return 0, fmt.Errorf("instructions: perf stat wrote no output: %w (%s)", err, strings.TrimSpace(ps.stderr.String()))
	}
	v, ok := parsePerfStat(string(data))
	if !ok {
		return 0, fmt.Errorf("instructions: perf stat counted nothing: %s", strings.TrimSpace(proc.Tail(strings.TrimSpace(string(data)), 1)))
	}
	return v, nil
}

func (ps *perfStat) kill() {
	if ps.cmd != nil && ps.cmd.Process != nil {
		_ = syscall.Kill(-ps.cmd.Process.Pid, syscall.SIGKILL)
		_ = ps.cmd.Wait()
	}
	ps.cleanup()
}

func (ps *perfStat) cleanup() {
	if ps.ctl != nil {
		ps.ctl.Close()
	}
	if ps.ackF != nil {
		ps.ackF.Close()
	}
	os.RemoveAll(ps.dir)
}

// Native returns the scenario measured without a counter: every
// instructions metric becomes the recorded elapsed time of its step,
// named NativeTime(metric). A finding judged on counts shows these times
// of the culprit against its parent (never judged: a count cannot see
// waiting, a time can, and the two need not agree). A scenario without
// instructions metrics is returned as it is. The copy is made once, so
// its samples share clusters.
func (s *Scenario) Native() *Scenario {
	if !s.counted() {
		return s
	}
	if s.native != nil {
		return s.native
	}
	n := *s
	n.native = nil
	n.metrics = nil
	for _, m := range s.metrics {
		if m.Value == "instructions" {
			m = Metric{Name: NativeTime(m.Name), Step: m.Step, Value: "elapsed", Unit: "s", Direction: stats.LowerIsBetter, Record: true, scale: 1}
		}
		n.metrics = append(n.metrics, m)
	}
	s.native = &n
	return s.native
}

// NativeTime names the elapsed-time metric Native puts in place of an
// instructions metric.
func NativeTime(metric string) string { return metric + ".native_time" }
