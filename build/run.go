package build

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// progressInterval is how often a long phase reports that it is still
// running.
const progressInterval = 10 * time.Second

// tailLines is how much of the build log a failure carries.
const tailLines = 40

// session is one build: its log file and its progress reporter.
type session struct {
	commit  string
	logPath string
	as      *proc.User // who the commands run as (see proc.Command)
	log     *os.File
	out     io.Writer

	// configured and cleaned record that configure, or a clean rebuild,
	// ran in this build: the build tree's products all changed.
	configured, cleaned bool

	mu         sync.Mutex
	phase      string
	phaseStart time.Time
	start      time.Time
	stop       chan struct{}
	done       chan struct{}
}

func newSession(commit, logPath string, progress io.Writer, as *proc.User) (*session, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("build log: %w", err)
	}
	s := &session{commit: commit, logPath: logPath, as: as, log: f, out: progress, start: time.Now(),
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.tick()
	return s, nil
}

func (s *session) tick() {
	defer close(s.done)
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			if s.phase != "" {
				fmt.Fprintf(s.out, "build %s: %s (%s, total %s)\n", Short(s.commit), s.phase,
					round(time.Since(s.phaseStart)), round(time.Since(s.start)))
			}
			s.mu.Unlock()
		}
	}
}

func round(d time.Duration) time.Duration { return d.Round(time.Second) }

// setPhase announces a new phase on the progress writer and in the log.
func (s *session) setPhase(phase string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase, s.phaseStart = phase, time.Now()
	fmt.Fprintf(s.out, "build %s: %s (total %s)\n", Short(s.commit), phase, round(time.Since(s.start)))
	fmt.Fprintf(s.log, "\n==> %s %s\n", time.Now().Format(time.RFC3339), phase)
}

// note writes a line to the log and the progress writer.
func (s *session) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "build %s: %s\n", Short(s.commit), msg)
	fmt.Fprintf(s.log, "==> %s\n", msg)
}

func (s *session) close() {
	close(s.stop)
	<-s.done
	s.log.Close()
}

// run runs a command in dir, as s.as, with its output appended to the log. On
// failure it returns a *Error for phase (a cancelled context is returned as
// the context's error instead, never as a build failure).
func (s *session) run(ctx context.Context, phase, dir string, env []string, name string, args ...string) error {
	// As the build user when pgbisect is root (proc.Command drops the
	// supplementary groups too).
	cmd := proc.Command(ctx, s.as, name, args...)
	cmd.Dir = dir
	// Die with pgbisect even when it is killed outright; killStrays
	// handles the grandchildren.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	// Only allowlisted variables: the commit being built is arbitrary code
	// and must not see the GitHub token or a database password.
	cmd.Env = proc.Env(env...)
	cmd.Stdout = s.log
	cmd.Stderr = s.log
	s.mu.Lock()
	fmt.Fprintf(s.log, "$ cd %s && %s %s\n", dir, name, strings.Join(args, " "))
	s.mu.Unlock()
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("building %s: %s interrupted: %w", Short(s.commit), phase, ctx.Err())
	}
	return &Error{Commit: s.commit, Phase: phase, LogPath: s.logPath, Tail: s.tail(), Err: err}
}

// tail returns the last tailLines lines of the log of this attempt. With
// make -j the compiler's error is often followed by pages of other jobs'
// output, so the first error lines of the attempt (up to maxErrorLines)
// come first when the tail does not hold them.
func (s *session) tail() string {
	data, err := os.ReadFile(s.logPath)
	if err != nil {
		return ""
	}
	last := proc.Tail(string(data), tailLines) + "\n"
	var errs []string
	for _, line := range strings.Split(string(data), "\n") {
		if isErrorLine(line) && !strings.Contains(last, line) {
			errs = append(errs, line)
			if len(errs) == maxErrorLines {
				break
			}
		}
	}
	if len(errs) == 0 {
		return last
	}
	return "--- errors ---\n" + strings.Join(errs, "\n") + "\n--- last lines ---\n" + last
}

// maxErrorLines bounds the error lines put before a failure's tail.
const maxErrorLines = 10

// isErrorLine recognizes compiler, linker, configure and make errors.
func isErrorLine(line string) bool {
	return strings.Contains(line, ": error:") || strings.Contains(line, ": fatal error:") ||
		strings.Contains(line, "undefined reference to") || strings.HasPrefix(line, "configure: error:")
}
