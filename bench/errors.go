package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// ErrUnmeasurable is matched (errors.Is) by every *MeasureError: the
// target's binaries ran, but the sample could not be taken on them.
var ErrUnmeasurable = errors.New("cannot be measured")

// MeasureError is a sample that failed because of what ran: initdb
// failing, the server not starting or crashing, a setup or workload step
// failing, or the metric missing from its output. Whether the build or
// the scenario is to blame, the Runner cannot tell; a caller that has
// measured the same scenario on other builds can (a bisection treats it
// as the build's fault at an interior commit, the scenario's when both
// endpoints fail). Failures of the machine (no disk, no port) and
// cancellations are other errors.
type MeasureError struct {
	Target string // the target's name
	// Phase is where the sample failed: "initdb", "start", "setup",
	// "warmup", "workload", "settings" (reading the server's settings),
	// "stop" or "metrics".
	Phase string
	// Crash is the server log line showing that a server process crashed
	// (killed by a signal, PANIC, failed assertion), or "".
	Crash string
	// LogTail is the last lines of the server log; LogPath is a copy of
	// the whole log kept under the state directory's logs/ ("" when none).
	LogTail, LogPath string
	Err              error
}

func (e *MeasureError) Error() string {
	return fmt.Sprintf("target %s cannot be measured (%s): %v", e.Target, e.Phase, e.Err)
}

// Is makes errors.Is(err, ErrUnmeasurable) true.
func (e *MeasureError) Is(target error) bool { return target == ErrUnmeasurable }

func (e *MeasureError) Unwrap() error { return e.Err }

// Reason says in one line what went wrong: the crash line when a server
// process crashed, else the phase and the first line of the error with
// the server log's last FATAL or ERROR line.
func (e *MeasureError) Reason() string {
	if e.Crash != "" {
		return fmt.Sprintf("the server crashed (%s): %s", e.Phase, e.Crash)
	}
	first, _, _ := strings.Cut(e.Err.Error(), "\n")
	s := fmt.Sprintf("%s failed: %s", e.Phase, strings.TrimSpace(first))
	if l := lastLogError(e.LogTail); l != "" && !strings.Contains(s, l) {
		s += ": " + l
	}
	return s
}

// crashMarkers are what the server log says when a server process dies
// abnormally: the postmaster reporting a child killed by a signal (or,
// on Windows, an exception), a PANIC, a failed assertion (TRAP).
var crashMarkers = []string{"was terminated by signal", "was terminated by exception", "PANIC:  ", "TRAP: "}

// crashLine returns the first line of log that shows a crash, from its
// severity on (without the log_line_prefix), or "".
func crashLine(log string) string {
	for _, l := range strings.Split(log, "\n") {
		for _, m := range crashMarkers {
			if !strings.Contains(l, m) {
				continue
			}
			for _, sev := range []string{"PANIC:  ", "TRAP: ", "LOG:  "} {
				if i := strings.Index(l, sev); i >= 0 {
					return strings.TrimSpace(l[i:])
				}
			}
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// lastLogError returns the last FATAL or ERROR line of a server log tail.
func lastLogError(tail string) string {
	lines := strings.Split(tail, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "FATAL:  ") || strings.Contains(lines[i], "ERROR:  ") {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}

// measureError wraps err, a failure of phase on cluster c, with the server
// log: its tail, any crash it shows, and a copy of it under
// stateDir/logs/ that outlives the cluster.
func measureError(stateDir string, c *cluster, target, phase string, err error) *MeasureError {
	e := &MeasureError{Target: target, Phase: phase, Err: err}
	b, rerr := c.pg.ReadFile(c.logFile)
	if rerr != nil {
		return e
	}
	e.LogTail = proc.Tail(string(b), 40)
	e.Crash = crashLine(string(b))
	dir := filepath.Join(stateDir, "logs")
	if os.MkdirAll(dir, 0o755) == nil {
		p := filepath.Join(dir, "server-"+safeName(target)+"-"+c.id+".log")
		if os.WriteFile(p, b, 0o644) == nil {
			e.LogPath = p
		}
	}
	return e
}
