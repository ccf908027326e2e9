package profile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/pgbisect/pgbisect/internal/base/proc"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Recorder runs perf record on a server's processes. Its zero value
// records with "perf" from PATH at 499 Hz.
//
// The event is cpu-clock, a software event: virtual machines often have
// no hardware counters, so cycles does not work there. perf records the
// whole machine (-a) and the stacks are then filtered to the server's
// processes: "perf record -p POSTMASTER" does not follow the backends the
// postmaster forks after perf attached (perf 6.1 records none of their
// samples), and those backends are the workload. Recording the machine
// needs root or kernel.perf_event_paranoid <= 0.
type Recorder struct {
	// Perf is the perf executable. Default: "perf" from PATH.
	Perf string
	// Frequency is the sampling rate in Hz. Default: 499 (a prime, so the
	// sampling does not beat with periodic work).
	Frequency int
	// Dir holds perf.data while recording; it is removed once the stacks
	// are folded. Default: os.TempDir().
	Dir string
}

// Recording is a perf record running; Stop ends it and returns the
// profile.
type Recording struct {
	r       Recorder
	roots   []int
	dir     string
	cmd     *exec.Cmd
	stderr  *bytes.Buffer
	exited  chan struct{}
	waitErr error
	warning string
}

// Start starts perf for the processes pids (the postmaster and its
// children; processes they fork later are included) and returns once
// perf is recording. It never fails: when perf is missing or not
// permitted, the Recording's Stop returns a Profile whose Warning says
// why and what to do.
func (r Recorder) Start(ctx context.Context, pids []int) *Recording {
	rec := &Recording{r: r, roots: pids}
	perf := r.Perf
	if perf == "" {
		perf = "perf"
	}
	path, err := exec.LookPath(perf)
	if err != nil {
		rec.warning = "no CPU profile: perf is not installed (Debian: apt-get install linux-perf)"
		return rec
	}
	if len(pids) == 0 {
		rec.warning = "no CPU profile: no server process to attach to"
		return rec
	}
	if rec.dir, err = os.MkdirTemp(r.Dir, "pgbisect-perf-"); err != nil {
		rec.warning = "no CPU profile: " + err.Error()
		return rec
	}
	ctl, ack := filepath.Join(rec.dir, "ctl"), filepath.Join(rec.dir, "ack")
	for _, f := range []string{ctl, ack} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			rec.warning = "no CPU profile: " + err.Error()
			return rec
		}
	}
	freq := r.Frequency
	if freq <= 0 {
		freq = 499
	}
	// Started disabled (-D -1) and enabled through the control fifo, whose
	// acknowledgement says the events are on: no sleep, no lost start.
	rec.cmd = exec.Command(path, "record", "-e", "cpu-clock", "-F", strconv.Itoa(freq), "-g", "--no-buildid-cache",
		"-o", filepath.Join(rec.dir, "perf.data"), "-D", "-1", "--control", "fifo:"+ctl+","+ack, "-a")
	rec.cmd.Env = proc.Env()
	rec.stderr = &bytes.Buffer{}
	rec.cmd.Stderr = rec.stderr
	rec.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := rec.cmd.Start(); err != nil {
		rec.warning = "no CPU profile: starting perf: " + err.Error()
		return rec
	}
	rec.exited = make(chan struct{})
	go func() { rec.waitErr = rec.cmd.Wait(); close(rec.exited) }()

	// O_RDWR so that opening a fifo never blocks on perf's side.
	ctlF, err := os.OpenFile(ctl, os.O_RDWR, 0)
	if err == nil {
		defer ctlF.Close()
		_, err = ctlF.WriteString("enable\n")
	}
	ackF, aerr := os.OpenFile(ack, os.O_RDWR, 0)
	if err == nil {
		err = aerr
	}
	if err != nil {
		rec.fail("no CPU profile: perf control fifo: " + err.Error())
		return rec
	}
	acked := make(chan error, 1)
	go func() {
		defer ackF.Close()
		line, err := bufio.NewReader(ackF).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ack" {
			err = fmt.Errorf("perf answered %q", line)
		}
		acked <- err
	}()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case err := <-acked:
		if err != nil {
			rec.fail("no CPU profile: " + err.Error())
		}
	case <-rec.exited:
		ackF.Close()
		rec.warning = rec.exitWarning()
	case <-timeout.C:
		rec.fail("no CPU profile: perf did not start recording within 30s")
	case <-ctx.Done():
		rec.fail("no CPU profile: " + ctx.Err().Error())
	}
	return rec
}

// fail kills perf and records why there is no profile.
func (rec *Recording) fail(warning string) {
	rec.warning = warning
	if rec.cmd != nil && rec.cmd.Process != nil {
		_ = syscall.Kill(-rec.cmd.Process.Pid, syscall.SIGKILL)
		<-rec.exited
	}
}

// exitWarning explains a perf that ended on its own, usually for want of
// permission.
func (rec *Recording) exitWarning() string {
	msg := strings.TrimSpace(rec.stderr.String())
	if i := strings.LastIndexByte(msg, '\n'); len(msg) > 400 && i >= 0 {
		msg = msg[i+1:]
	}
	w := "no CPU profile: perf record failed"
	if rec.waitErr != nil {
		w += " (" + rec.waitErr.Error() + ")"
	}
	if msg != "" {
		w += ": " + msg
	}
	if b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid"); err == nil && os.Geteuid() != 0 {
		w += fmt.Sprintf(" [kernel.perf_event_paranoid is %s: run as root or set it to 1 or less]", strings.TrimSpace(string(b)))
	}
	return w
}

// Stop ends the recording, symbolises the stacks at once (the binaries
// are those of the build still in place) and returns them folded;
// perf.data is removed. Problems become the Profile's Warning. When ctx
// is already done perf is killed and nothing is symbolised.
func (rec *Recording) Stop(ctx context.Context) Profile {
	if rec.dir != "" {
		defer os.RemoveAll(rec.dir)
	}
	if rec.warning != "" {
		return Profile{Warning: rec.warning}
	}
	if ctx.Err() != nil {
		rec.fail("no CPU profile: the run was cancelled")
		return Profile{Warning: rec.warning}
	}
	_ = syscall.Kill(-rec.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-rec.exited:
	case <-time.After(time.Minute):
		rec.fail("no CPU profile: perf record did not stop within a minute")
		return Profile{Warning: rec.warning}
	}
	data := filepath.Join(rec.dir, "perf.data")
	if _, err := os.Stat(data); err != nil {
		return Profile{Warning: rec.exitWarning()}
	}
	perf := rec.cmd.Path
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(sctx, perf, "script", "-i", data, "--show-task-events", "-F", "comm,pid,tid,ip,sym,dso")
	cmd.Env = proc.Env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return Profile{Warning: fmt.Sprintf("no CPU profile: perf script: %v: %s", err, strings.TrimSpace(errb.String()))}
	}
	p, err := ParseScript(&out, rec.roots)
	if err != nil {
		return Profile{Warning: "no CPU profile: reading perf script output: " + err.Error()}
	}
	if p.Samples == 0 {
		p.Warning = "the CPU profile has no samples (the step was too short for 499 Hz, or perf saw no server process)"
	}
	return p
}

// ErrNoProfile is returned by Compare when a side has no usable profile.
var ErrNoProfile = errors.New("no usable CPU profile")
