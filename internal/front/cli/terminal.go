package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/pgbisect/pgbisect/internal/app"
)

// terminal is where a command's progress goes: its writer, whether that
// is a person's terminal, and how wide it is (columns).
type terminal struct {
	w     io.Writer
	tty   bool
	width int
}

// terminalOf describes w: a terminal when it is a file that is one.
func terminalOf(w io.Writer) terminal {
	t := terminal{w: w, width: 100}
	f, ok := w.(*os.File)
	if !ok {
		return t
	}
	var termios syscall.Termios
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&termios))); e != 0 {
		return t
	}
	t.tty = true
	var ws struct{ Row, Col, X, Y uint16 }
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws))); e == 0 && ws.Col > 0 {
		t.width = int(ws.Col)
	}
	return t
}

// bisectProgress shows a bisection's events on t. Not on a terminal, or
// with verbose, every line is printed as it comes (tests and CI see
// lines). On a terminal it is quiet: one status line updated in place
// (phase, candidates left, builds, samples, time left, what runs now),
// the decisions and notes as lines above it, and the per-build and
// per-sample lines (the bisection's status before each build and sample,
// build progress, a revert check's samples, profiled runs) only in the log file
// logsDir/bisect-ID.log, which gets every line with its time and whose
// path is printed once the bisection's ID is known.
type bisectProgress struct {
	t       terminal
	quiet   bool
	logsDir string

	mu      sync.Mutex
	log     *os.File
	noLog   bool     // the log file could not be opened
	pending []string // log lines before the ID is known
	status  string   // the status line shown, "" for none
	detail  string   // the last build progress or sample line, after it
	shown   bool     // a status line is on the screen
}

func newBisectProgress(t terminal, verbose bool, logsDir string) *bisectProgress {
	return &bisectProgress{t: t, quiet: t.tty && !verbose, logsDir: logsDir}
}

// sink returns the app.Sink that shows the events.
func (p *bisectProgress) sink() app.Sink {
	if !p.quiet {
		return progress(p.t.w)
	}
	return p.event
}

// sampleNote matches a note that reports one sample: a revert check's, or
// a profiled run's.
var sampleNote = regexp.MustCompile(` sample \d+ of up to \d+$|^profiled \S+ run \d+/\d+: \d+ CPU samples$`)

func (p *bisectProgress) event(e app.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := eventLine(e)
	if line != "" {
		p.logLine(e.At, line)
	}
	if e.Bisection != "" && p.log == nil && !p.noLog {
		p.openLog(e.Bisection)
	}
	switch {
	case e.Kind == app.KindDone:
		p.clear()
		return
	case e.Kind == app.KindStatus:
		p.status, p.detail = e.Short, ""
		if p.status == "" {
			p.status = e.Text
		}
	case e.Kind == app.KindBuildStep || e.Kind == app.KindSample || e.Kind == app.KindNote && sampleNote.MatchString(line):
		if line == "" {
			return
		}
		p.detail = line
	case line == "":
		return
	default:
		p.clear()
		fmt.Fprintln(p.t.w, line)
	}
	p.draw()
}

// clear removes the status line from the screen.
func (p *bisectProgress) clear() {
	if p.shown {
		fmt.Fprint(p.t.w, "\r\033[K")
		p.shown = false
	}
}

// draw shows the status line, cut to the terminal's width.
func (p *bisectProgress) draw() {
	s := p.status
	if p.detail != "" {
		if s != "" {
			s += " — "
		}
		s += p.detail
	}
	if s == "" {
		return
	}
	if utf8.RuneCountInString(s) > p.t.width-1 {
		s = string([]rune(s)[:max(p.t.width-2, 1)]) + "…"
	}
	fmt.Fprint(p.t.w, "\r\033[K"+s)
	p.shown = true
}

// logLine writes a line to the log file, or keeps it until there is one.
func (p *bisectProgress) logLine(at time.Time, line string) {
	if at.IsZero() {
		at = time.Now()
	}
	s := at.Format("15:04:05 ") + line + "\n"
	switch {
	case p.log != nil:
		p.log.WriteString(s)
	case !p.noLog:
		p.pending = append(p.pending, s)
	}
}

// openLog opens logsDir/bisect-ID.log (appended to: a resumed bisection
// continues its log) and says where it is.
func (p *bisectProgress) openLog(id string) {
	path := filepath.Join(p.logsDir, "bisect-"+safeFileName(id)+".log")
	err := os.MkdirAll(p.logsDir, 0o755)
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}
	if err != nil {
		p.noLog, p.pending = true, nil
		p.clear()
		fmt.Fprintf(p.t.w, "no progress log (%v): run with --verbose to see every build and sample line\n", err)
		return
	}
	p.log = f
	for _, s := range p.pending {
		f.WriteString(s)
	}
	p.pending = nil
	p.clear()
	fmt.Fprintf(p.t.w, "every build and sample line goes to %s (--verbose shows them here)\n", path)
}

// logger returns the logger a quiet bisection's components log with (nil
// when not quiet: keep the command's own). Its warnings and errors are
// printed above the status line, its other records go to the log file
// only; written to the terminal directly they would break the status line.
func (p *bisectProgress) logger() *slog.Logger {
	if !p.quiet {
		return nil
	}
	return slog.New(slog.NewTextHandler(logLines{p}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// logLines passes a text handler's records to a bisectProgress.
type logLines struct{ p *bisectProgress }

func (l logLines) Write(b []byte) (int, error) {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		p.logLine(time.Time{}, line)
		if strings.Contains(line, " level=INFO ") || strings.Contains(line, " level=DEBUG ") {
			continue
		}
		p.clear()
		fmt.Fprintln(p.t.w, line)
		p.draw()
	}
	return len(b), nil
}

// close clears the status line and closes the log.
func (p *bisectProgress) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	p.status, p.detail = "", "" // nothing to draw again
	if p.log != nil {
		p.log.Close()
		p.log, p.noLog = nil, true
	}
}

// safeFileName keeps letters, digits, '.', '_' and '-'.
func safeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}
