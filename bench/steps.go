package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// stepResult is what one step produced: its elapsed time and the values
// metrics may take from it (see valueKinds), in their natural units.
type stepResult struct {
	elapsed time.Duration
	values  map[string]float64
	series  map[string][]float64
	// scalarText is the raw first column of a sql or shell step's last
	// row, kept to explain a scalar that is not a number.
	scalarText string
	// notes say why a server statistic was skipped, by metric key.
	notes map[string]string
	// cachesKept: the step asked for drop_caches and they could not be
	// dropped.
	cachesKept bool
}

// stepEnv is what steps run against: a started cluster, a session shared
// by the pgx-based steps of one phase, and the client tools' directory.
type stepEnv struct {
	c         *cluster
	conn      *pgx.Conn
	clientBin string
	progress  func(line string) // pgbench -P lines, for the person watching
	// serverMetrics are the server-statistic metrics by step name, measured
	// around those steps (set for workload runs only).
	serverMetrics map[string][]Metric
	// counted are the steps whose instructions are counted, by counter
	// (set for the measured workload run only; counter.go).
	counter string
	counted map[string]bool
}

// connect opens a session to the cluster's private socket.
func (c *cluster) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := c.pg.ConnConfig("postgres")
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the server: %w", err)
	}
	return conn, nil
}

// runStep runs one expanded step and measures its wall-clock time.
func runStep(ctx context.Context, env *stepEnv, st *Step, timeout time.Duration) (stepResult, error) {
	if st.Timeout > 0 {
		timeout = st.Timeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("step %s timed out after %s (raise timeout: in the step or timeouts: in the scenario)", st.Name, timeout))
	defer cancel()
	res := stepResult{values: map[string]float64{}, series: map[string][]float64{}}
	pr, err := startProbe(ctx, env.c, env.serverMetrics[st.Name])
	if err != nil {
		return res, err
	}
	var cp *countProbe
	var own *pgx.Conn // the counted step's own session
	if env.counted[st.Name] {
		if cp, own, err = startStepCount(ctx, env, st); err != nil {
			if pr != nil {
				_ = pr.finish(ctx, &res)
			}
			return res, err
		}
		shared := env.conn
		if own != nil {
			env.conn = own
		}
		defer func() { env.conn = shared }()
	}
	start := time.Now()
	switch st.Kind() {
	case "sql":
		err = runSQL(ctx, env, st.SQL, &res)
	case "copy":
		err = runCopy(ctx, env, st.Copy, &res)
	case "explain":
		err = runExplain(ctx, env, st.Explain, &res)
	case "pgbench":
		err = runPgbench(ctx, env, st, &res)
	case "shell":
		err = runShell(ctx, env, st.Shell, &res)
	}
	res.elapsed = time.Since(start)
	res.values["elapsed"] = res.elapsed.Seconds()
	// perf stops counting while the backend it watches lives; valgrind's
	// counts are written when the step's processes exit.
	if cp != nil && cp.perf != nil {
		err = finishCount(ctx, cp, err, &res)
	}
	if own != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = own.Close(cctx)
		cancel()
	}
	if cp != nil && cp.perf == nil {
		err = finishCount(ctx, cp, err, &res)
	}
	if pr != nil {
		if err == nil && own == nil {
			err = pr.flushSession(ctx, env.conn)
		}
		if perr := pr.finish(ctx, &res); err == nil {
			err = perr
		}
	}
	if err != nil && ctx.Err() != nil && context.Cause(ctx) != nil {
		if cause := context.Cause(ctx); !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%v)", cause, err)
		}
	}
	return res, err
}

// finishCount ends a step's count and records it, unless the step
// failed (err), which it returns as it is.
func finishCount(ctx context.Context, cp *countProbe, err error, res *stepResult) error {
	if err != nil {
		if cp.perf != nil {
			cp.perf.kill()
		}
		return err
	}
	v, _, err := cp.finish(ctx)
	if err != nil {
		return err
	}
	res.values["instructions"] = v
	return nil
}

// startStepCount opens the counted step's own session (for the steps that
// run in pgbisect's session) and starts counting.
func startStepCount(ctx context.Context, env *stepEnv, st *Step) (*countProbe, *pgx.Conn, error) {
	var own *pgx.Conn
	switch st.Kind() {
	case "sql", "copy", "explain":
		var err error
		if own, err = env.c.connect(ctx); err != nil {
			return nil, nil, err
		}
	}
	cp, err := startCount(ctx, env.counter, env.c, own, st.Kind())
	if err != nil {
		if own != nil {
			own.Close(context.WithoutCancel(ctx))
		}
		return nil, nil, err
	}
	return cp, own, nil
}

func runSQL(ctx context.Context, env *stepEnv, sql string, res *stepResult) error {
	results, err := env.conn.PgConn().Exec(ctx, sql).ReadAll()
	if err != nil {
		return err
	}
	for i := len(results) - 1; i >= 0; i-- {
		r := results[i]
		if i == len(results)-1 {
			res.values["rows"] = float64(r.CommandTag.RowsAffected())
		}
		if len(r.Rows) > 0 && len(r.Rows[0]) > 0 {
			setScalar(res, string(r.Rows[0][0]))
			break
		}
	}
	return nil
}

func setScalar(res *stepResult, text string) {
	res.scalarText = text
	if f, err := strconv.ParseFloat(strings.TrimSpace(text), 64); err == nil {
		res.values["scalar"] = f
	}
}

func copyCommand(cp *CopyStep, source string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "COPY %s FROM %s", cp.Table, source)
	if cp.Options != "" {
		fmt.Fprintf(&b, " WITH (%s)", cp.Options)
	}
	if cp.Where != "" {
		fmt.Fprintf(&b, " WHERE %s", cp.Where)
	}
	return b.String()
}

func runCopy(ctx context.Context, env *stepEnv, cp *CopyStep, res *stepResult) error {
	if !cp.Client {
		results, err := env.conn.PgConn().Exec(ctx, copyCommand(cp, quoteLiteral(cp.File))).ReadAll()
		if err != nil {
			return err
		}
		if len(results) > 0 {
			res.values["rows"] = float64(results[len(results)-1].CommandTag.RowsAffected())
		}
		return nil
	}
	// Root reads the file: one in the cluster's directories is opened
	// so that a symlink there cannot point it at a file outside.
	f, err := env.c.pg.Open(cp.File)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer f.Close()
	tag, err := env.conn.PgConn().CopyFrom(ctx, f, copyCommand(cp, "STDIN"))
	if err != nil {
		return err
	}
	res.values["rows"] = float64(tag.RowsAffected())
	return nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func runExplain(ctx context.Context, env *stepEnv, query string, res *stepResult) error {
	results, err := env.conn.PgConn().Exec(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+query).ReadAll()
	if err != nil {
		return err
	}
	if len(results) == 0 || len(results[0].Rows) == 0 {
		return errors.New("explain returned no plan")
	}
	vals, err := parseExplain(results[0].Rows[0][0])
	if err != nil {
		return err
	}
	for k, v := range vals {
		res.values[k] = v
	}
	return nil
}

// runPgbench runs the client pgbench against the cluster. An inline
// script is written to the work directory and passed with -f.
func runPgbench(ctx context.Context, env *stepEnv, st *Step, res *stepResult) error {
	args := append([]string(nil), st.Pgbench.Args...)
	if st.Pgbench.Script != "" {
		// The work directory is the server user's: root writes through os.Root.
		name := "pgbench-" + safeName(st.Name) + ".sql"
		if err := env.c.pg.WriteFile(env.c.workDir, name, st.Pgbench.Script, 0o644); err != nil {
			return err
		}
		file := filepath.Join(env.c.workDir, name)
		args = append(args, "-f", file)
	}
	cmd := proc.Command(ctx, env.c.user, filepath.Join(env.clientBin, "pgbench"), args...)
	cmd.Dir = env.c.workDir
	cmd.Env = env.c.env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &lineWriter{w: &stderr, line: env.progress}
	err := cmd.Run()
	out := stdout.String() + stderr.String()
	if err != nil {
		return fmt.Errorf("pgbench %s: %w\n%s", strings.Join(args, " "), exitError(err), proc.Tail(out, 15))
	}
	pr := parsePgbench(out)
	for k, v := range pr.values {
		res.values[k] = v
	}
	for k, v := range pr.series {
		res.series[k] = v
	}
	return nil
}

func runShell(ctx context.Context, env *stepEnv, sh *ShellStep, res *stepResult) error {
	argv := sh.Argv
	if sh.Script != "" {
		argv = []string{"/bin/sh", "-c", sh.Script}
	}
	name := argv[0]
	if !strings.Contains(name, "/") {
		// Resolve against the client tools first, like the PATH below.
		if p := filepath.Join(env.clientBin, name); isExecutable(p) {
			name = p
		} else if p, err := exec.LookPath(name); err == nil {
			name = p
		}
	}
	cmd := proc.Command(ctx, env.c.user, name, argv[1:]...)
	cmd.Dir = env.c.workDir
	cmd.Env = append(env.c.env(), "PGBISECT_WORKDIR="+env.c.workDir)
	for i, e := range cmd.Env {
		if strings.HasPrefix(e, "PATH=") {
			cmd.Env[i] = "PATH=" + env.clientBin + ":" + strings.TrimPrefix(e, "PATH=")
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), exitError(err), proc.Tail(stdout.String()+stderr.String(), 15))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		setScalar(res, last)
	}
	return nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func exitError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("exited with %v", ee.ProcessState)
	}
	return err
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

// lineWriter copies everything to w and hands complete lines to line.
type lineWriter struct {
	w    io.Writer
	line func(string)
	buf  []byte
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	n, err := lw.w.Write(p)
	if lw.line == nil {
		return n, err
	}
	lw.buf = append(lw.buf, p...)
	for {
		i := bytes.IndexByte(lw.buf, '\n')
		if i < 0 {
			break
		}
		lw.line(string(lw.buf[:i]))
		lw.buf = lw.buf[i+1:]
	}
	return n, err
}

// ForBisection returns the scenario a bisection judging metric runs: its
// workload ends with the last step that metric or a recorded metric
// (MetricDef.Record) takes its value from, so trailing steps that feed
// nothing the bisection judges or records are not run (copy-single's
// parse step when the bisection judges copy_time). The metrics of the
// steps that still run are kept: they are free and stored with every
// sample; those of the steps left out are dropped. skipped names the steps
// left out; with none, sc itself is returned. Only trailing steps are left
// out, since a step may prepare the ones after it; a workload must
// therefore not count on its own last steps to prepare the next sample
// (reset state at its start, as the shipped scenarios do). pgbisect run
// and compare run every step.
func (s *Scenario) ForBisection(metric string) (sc *Scenario, skipped []string) {
	last := -1
	for i, st := range s.Workload {
		for _, m := range s.metrics {
			if m.Step == st.Name && (m.Name == metric || m.Record) {
				last = i
			}
		}
	}
	if last < 0 || last == len(s.Workload)-1 {
		return s, nil
	}
	c := *s
	c.Workload = s.Workload[: last+1 : last+1]
	ran := map[string]bool{}
	for _, st := range c.Workload {
		ran[st.Name] = true
	}
	c.metrics = nil
	for _, m := range s.metrics {
		if ran[m.Step] {
			c.metrics = append(c.metrics, m)
		}
	}
	for _, st := range s.Workload[last+1:] {
		skipped = append(skipped, st.Name)
	}
	return &c, skipped
}

// WorkloadSteps names the workload's steps in order.
func (s *Scenario) WorkloadSteps() []string {
	names := make([]string, len(s.Workload))
	for i, st := range s.Workload {
		names[i] = st.Name
	}
	return names
}
