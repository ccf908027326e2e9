package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pgbisect/pgbisect/bench/profile"
	"github.com/pgbisect/pgbisect/internal/base/pgcluster"
	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// Target is one installed PostgreSQL build to measure.
type Target struct {
	// Name labels the target in samples and progress (a short commit hash,
	// "A", "pg15").
	Name string
	// BinDir holds its initdb, pg_ctl and postgres.
	BinDir string
	// BuildOptions describes how it was built; recorded with every sample.
	BuildOptions string
}

// Sample is one measured workload run: the unit of replication.
type Sample struct {
	Target string `json:"target"`
	Point  string `json:"point"`
	// Values maps metric names (Scenario.MetricSpecs) to their values in
	// the metric's unit.
	Values map[string]float64 `json:"values"`
	// Series holds per-interval figures of pgbench steps run with -P,
	// keyed "<step>.tps" and "<step>.latency" (ms).
	Series  map[string][]float64 `json:"series,omitempty"`
	Env     Environment          `json:"env"`
	Start   time.Time            `json:"start"`
	Elapsed time.Duration        `json:"elapsed_ns"`
	// Profile is the CPU profile of the measured workload run, when the
	// Runner has a Profiler (see profiling.go).
	Profile *profile.Profile `json:"profile,omitempty"`
}

// Runner runs samples of scenarios. Its zero value is not usable: set
// StateDir. A Runner runs one sample at a time (Run holds a lock).
//
// Cluster lifecycle: a scenario with lifecycle "fresh" gets a new cluster
// for every sample (initdb, start, setup, workload, stop, remove). With
// "restart" the Runner keeps one cluster per scenario, target and point:
// initdb and setup run when the first sample of that key needs it, and
// every sample starts the server, runs the workload and stops it again.
// With "warm" the kept cluster's server stays up between samples and the
// scenario's between steps (a CHECKPOINT by default) run before each
// sample; interleaved targets then have a server each, idle while another
// is measured. Restart clusters are stopped between samples, so interleaving
// targets (A B B A) keeps several data directories on disk but never two
// idle servers in memory competing with the one being measured; at most
// MaxKept are kept (least recently used removed first) so a long bisection
// does not fill the disk. Close removes the kept clusters. A sample that fails or is cancelled kills its
// server and removes its cluster (a restart cluster is rebuilt by the next
// sample), unless KeepClusters is set.
type Runner struct {
	// StateDir holds the clusters, under StateDir/clusters/<id>.
	StateDir string
	// RunAs runs initdb, the server and the client tools when pgbisect runs
	// as root. Default: the user "postgres".
	RunAs *proc.User
	// ClientBin is the directory of the pgbench used for every target, so
	// that a change in pgbench is not mistaken for one in the server.
	// Default: the BinDir of the first target Run measures, kept here for
	// every later sample: one Runner never runs two pgbench binaries. Each
	// sample names the pgbench that ran (Environment.Pgbench).
	ClientBin string
	// Progress receives one line per step for the person watching. Default:
	// discarded.
	Progress io.Writer
	// Log receives warnings (busy machine, caches not dropped). Default:
	// discarded.
	Log *slog.Logger
	// KeepClusters leaves cluster directories behind for debugging.
	KeepClusters bool
	// MaxKept bounds the stopped clusters kept for "restart" scenarios
	// (each holds its setup's data); the least recently used is removed
	// beyond it and rebuilt if needed again. Default: 4, enough for the
	// targets of a comparison or a bisection step at a time.
	MaxKept int
	// MeasureLock is the file of the machine lock each sample holds, so
	// that two pgbisect processes never measure at once (package
	// machinelock: the lock a job holds, shared by its samples). Default:
	// machinelock.Path(StateDir); "-" takes none.
	MeasureLock string
	// Profiler, when set, records a CPU profile of the server during each
	// sample's measured workload run (see profiling.go). Default: none.
	Profiler *profile.Recorder

	mu           sync.Mutex
	kept         map[keptKey]*cluster
	uses         int // counter ordering kept clusters by last use
	staleRemoved bool
	warned       map[string]bool
	servers      servers           // each target's postgres, described (check.go)
	noSync       bool              // the order study's control: no sync before samples
	counters     map[string]string // a scenario's counter key -> the counter used (counter.go)
}

// Sweep removes what a pgbisect process of the same state directory that
// died (kill -9, a crash) left behind: its clusters, stopping their servers,
// and the OS settings its sample changed. The first Run sweeps too; a
// daemon sweeps when it starts, so a restarted machine leaves no server of
// its dead predecessor running even before it takes a job.
func (r *Runner) Sweep() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.StateDir == "" {
		return errors.New("bench: Runner.StateDir is not set")
	}
	u, err := r.user()
	if err != nil {
		return err
	}
	return r.sweep(u)
}

func (r *Runner) sweep(u *proc.User) error {
	removeStale(r.StateDir, u)
	if err := hostSys.restoreOS(r.osRestoreFile()); err != nil {
		return fmt.Errorf("putting back the OS settings an interrupted sample changed: %w", err)
	}
	r.staleRemoved = true
	return nil
}

// Run runs one sample of sc at point pt against target t and returns its
// metrics. It is self-contained and cancellable: when ctx ends, every
// process it started is killed and its cluster removed before it returns.
func (r *Runner) Run(ctx context.Context, sc *Scenario, t Target, pt Point) (*Sample, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.StateDir == "" {
		return nil, errors.New("bench: Runner.StateDir is not set")
	}
	u, err := r.user()
	if err != nil {
		return nil, err
	}
	unlock, err := lockMeasure(ctx, r.MeasureLock, r.StateDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !r.staleRemoved {
		if err := r.sweep(u); err != nil {
			return nil, err
		}
	}
	if err := pgcluster.CheckBinDir(t.BinDir); err != nil {
		return nil, fmt.Errorf("target %s: %w: give the bin directory of a PostgreSQL installation", t.Name, err)
	}
	if r.ClientBin == "" {
		r.ClientBin = t.BinDir
	}
	clientBin := r.ClientBin
	if !isExecutable(filepath.Join(clientBin, "pgbench")) && sc.usesPgbench() {
		return nil, fmt.Errorf("client tools: %s has no pgbench: set bench.client_bin to a PostgreSQL bin directory with pgbench", clientBin)
	}
	if !sc.OS.Empty() {
		changed, err := hostSys.applyOS(r.StateDir, sc.OS, r.osRestoreFile())
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := hostSys.undo(changed); err != nil {
				r.log().Warn("putting back OS settings", slog.String("err", err.Error()))
				return
			}
			os.Remove(r.osRestoreFile())
		}()
	}

	counter := ""
	if sc.counted() {
		if counter, err = r.counter(ctx, sc); err != nil {
			return nil, err
		}
		if counter == CounterValgrind && sc.Lifecycle == Warm {
			return nil, fmt.Errorf("scenario %s: counting under valgrind starts the server of every sample under it, which lifecycle warm keeps running: use lifecycle restart or fresh (or counter: perf on a machine with hardware counters)", sc.Name)
		}
	}

	var serverCPUs, clientCPUs cpuSet
	if !sc.CPUs.Empty() {
		if serverCPUs, clientCPUs, err = checkCPUs(sc.CPUs); err != nil {
			return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		restore, err := pinSelf(clientCPUs)
		if err != nil {
			return nil, err
		}
		defer restore()
	}

	s := &Sample{Target: t.Name, Point: pt.String(), Start: time.Now(), Values: map[string]float64{}, Series: map[string][]float64{}}
	label := t.Name
	if s.Point != "" {
		label += " " + s.Point
	}
	key := keptKey{sc, t.Name, t.BinDir, s.Point}
	c := r.kept[key]
	delete(r.kept, key) // put back only when the sample succeeds
	ok := false
	defer func() {
		if c == nil {
			return
		}
		if ok && (sc.Lifecycle == Restart || sc.Lifecycle == Warm) {
			if r.kept == nil {
				r.kept = map[keptKey]*cluster{}
			}
			r.uses++
			c.lastUse = r.uses
			r.kept[key] = c
			r.evict(ctx)
			return
		}
		r.discard(ctx, c, sc)
	}()

	if c == nil {
		if c, err = newCluster(r.StateDir, t.BinDir, u); err != nil {
			return nil, err
		}
	}
	exp, err := sc.expand(pt, c.runtimeVars(clientBin))
	if err != nil {
		return nil, err
	}
	// fail marks a failure of what ran on the cluster as unmeasurable,
	// with the server log; a cancellation stays what it is.
	fail := func(phase string, err error) error {
		if ctx.Err() != nil {
			return err
		}
		// Stopped before its log is read: the postmaster logs a crashed
		// child when it reaps it, which it does before it exits, and a
		// client sees its connection drop before that.
		if c.running {
			_ = c.stop(ctx, sc.Timeouts.Start)
		}
		return measureError(r.StateDir, c, t.Name, phase, err)
	}
	env := &stepEnv{c: c, clientBin: clientBin, progress: func(line string) {
		if strings.HasPrefix(line, "progress:") {
			r.progressf("  [%s] %s", label, line)
		}
	}}
	warmups := sc.Warmup
	if !c.setupOK {
		warmups += sc.ClusterWarmup
		settings, err := r.serverSettings(ctx, sc, t, u, exp, c.ownSettings())
		if se, ve := (*SettingError)(nil), (*VersionError)(nil); errors.As(err, &se) || errors.As(err, &ve) {
			// This build's server rejects the scenario (a setting, or a
			// version outside the scenario's): inside a bisection's range
			// the commit is skipped, at both endpoints it is a scenario
			// error.
			return nil, fail("settings", err)
		}
		if err != nil {
			return nil, err
		}
		r.progressf("  [%s] initdb %s", label, c.dir)
		ictx, cancel := context.WithTimeout(ctx, sc.Timeouts.Start)
		err = c.initdb(ictx, exp.initdb, settings)
		cancel()
		if err != nil {
			return nil, fail("initdb", err)
		}
		if err := c.start(ctx, sc.Timeouts.Start); err != nil {
			return nil, fail("start", err)
		}
		if _, err := r.phase(ctx, env, "setup", exp.setup, sc.Timeouts.Setup, label); err != nil {
			return nil, fail("setup", err)
		}
		c.setupOK = true
	}
	// Every sample starts with no dirty pages in the OS page cache: files
	// the previous sample or a setup wrote without fsync (initdb --no-sync,
	// COPY TO, statistics, logs) would otherwise be written back during
	// this sample's workload, often another target's (the kernel writes a
	// dirty page back ~30 s after it was dirtied).
	cachesDropped := false
	// valgrind counts a server started under it: the setup ran natively.
	if sc.Lifecycle == Restart || sc.DropCaches || counter == CounterValgrind {
		if err := c.stop(ctx, sc.Timeouts.Start); err != nil {
			return nil, fail("stop", err)
		}
		if sc.DropCaches {
			cachesDropped = r.dropCaches()
		}
		if !cachesDropped && !r.noSync {
			syscall.Sync()
		}
		start := c.start
		if counter == CounterValgrind {
			start = c.startValgrind
		}
		if err := start(ctx, sc.Timeouts.Start); err != nil {
			return nil, fail("start", err)
		}
	} else {
		if sc.Lifecycle == Warm {
			if _, err := r.phase(ctx, env, "between", exp.between, sc.Timeouts.Setup, label); err != nil {
				return nil, fail("between", err)
			}
		}
		if !r.noSync {
			syscall.Sync()
		}
	}
	var placement *Placement
	if !sc.CPUs.Empty() {
		if placement, err = pinServer(c, serverCPUs, clientCPUs); err != nil {
			return nil, err
		}
	}
	s.Env = Fingerprint(ctx, c.dataDir)
	s.Env.CPUs = placement
	s.Env.BuildOptions = t.BuildOptions
	if sc.usesPgbench() {
		s.Env.Pgbench = filepath.Join(clientBin, "pgbench")
	}
	s.Env.CachesDropped = cachesDropped
	s.Env.Counter = counter
	if counter == CounterValgrind {
		s.Env.Warnings = append(s.Env.Warnings, "instructions counted under valgrind: the server ran many times slower, so the times of this sample are not native times")
	}
	if sc.DropCaches && !cachesDropped {
		s.Env.Warnings = append(s.Env.Warnings, "OS caches were not dropped (needs root and a writable /proc/sys/vm/drop_caches)")
	}
	if s.Env.Busy {
		r.log().Warn("machine is busy; results will be noisy", slog.Float64("load1", s.Env.LoadAvg[0]), slog.Int("cores", s.Env.Cores))
	}
	env.serverMetrics = sc.serverMetrics()
	for i := range warmups {
		if _, err := r.phase(ctx, env, fmt.Sprintf("warmup %d/%d", i+1, warmups), exp.workload, sc.Timeouts.Workload, label); err != nil {
			return nil, fail("warmup", err)
		}
	}
	env.counter, env.counted = counter, sc.countedSteps()
	stopProfile := r.startProfile(ctx, c, s)
	results, err := r.phase(ctx, env, "workload", exp.workload, sc.Timeouts.Workload, label)
	stopProfile()
	if err != nil {
		return nil, fail("workload", err)
	}
	if err := c.serverInfo(ctx, &s.Env); err != nil {
		return nil, fail("settings", fmt.Errorf("reading server settings: %w", err))
	}
	if sc.Lifecycle != Warm {
		if err := c.stop(ctx, sc.Timeouts.Start); err != nil {
			return nil, fail("stop", err)
		}
	}
	// A server process that crashed and was restarted (crash recovery) may
	// leave the workload none the wiser, but the sample measured recovery.
	if line := crashLine(c.logTail(1 << 20)); line != "" {
		return nil, fail("workload", fmt.Errorf("a server process crashed during the sample: %s", line))
	}
	for _, m := range sc.metrics {
		res := results[m.Step]
		if note, skipped := res.notes[m.key()]; skipped {
			s.Env.Warnings = append(s.Env.Warnings, fmt.Sprintf("metric %s skipped: %s", m.Name, note))
			continue
		}
		v, have := res.values[m.key()]
		if !have {
			return nil, fail("metrics", fmt.Errorf("metric %s: step %s gave no %s value%s", m.Name, m.Step, m.Value, missingHint(m.Value, res)))
		}
		s.Values[m.Name] = v * m.scale
	}
	for _, st := range exp.workload {
		if results[st.Name].cachesKept {
			s.Env.Warnings = append(s.Env.Warnings, fmt.Sprintf("step %s: OS caches were not dropped before it (needs root and a writable /proc/sys/vm/drop_caches)", st.Name))
		}
		for k, series := range results[st.Name].series {
			s.Series[st.Name+"."+k] = series
		}
	}
	s.Elapsed = time.Since(s.Start)
	ok = true
	return s, nil
}

func missingHint(value string, res stepResult) string {
	switch value {
	case "scalar":
		if res.scalarText != "" {
			return fmt.Sprintf(": %q is not a number", res.scalarText)
		}
		return ": it returned no rows (make its last statement a query of one number)"
	case "latency_stddev":
		return ": pgbench prints it only with -P, --rate or --latency-limit"
	case "tps", "latency_avg":
		return ": pgbench printed no summary (was it an initialization run, -i?)"
	case "io_read_time", "io_write_time":
		return ": set track_io_timing = on in settings"
	}
	return ""
}

// phase runs steps in one session and returns each step's result by name.
func (r *Runner) phase(ctx context.Context, env *stepEnv, name string, steps []Step, timeout time.Duration, label string) (map[string]stepResult, error) {
	key := "setup"
	if name != "setup" && name != "between" {
		key = "workload" // warm-up runs are workload runs
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%s timed out after %s (raise timeouts.%s in the scenario)", name, timeout, key))
	defer cancel()
	conn, err := env.c.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w\nserver log (%s):\n%s", name, err, env.c.logFile, env.c.logTail(15))
	}
	env.conn = conn
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = conn.Close(cctx)
		cancel()
		env.conn = nil
	}()
	results := map[string]stepResult{}
	for i := range steps {
		st := &steps[i]
		r.progressf("  [%s] %s %d/%d: %s (%s)", label, name, i+1, len(steps), st.Name, st.Kind())
		kept := st.DropCaches && !r.dropCaches()
		res, err := runStep(ctx, env, st, timeout)
		res.cachesKept = kept
		if err != nil {
			if ctx.Err() != nil && context.Cause(ctx) != nil && !errors.Is(err, context.Cause(ctx)) {
				err = fmt.Errorf("%w: %v", context.Cause(ctx), err)
			}
			return nil, fmt.Errorf("%s step %s (%s): %w\nserver log (%s):\n%s", name, st.Name, st.Kind(), err, env.c.logFile, env.c.logTail(15))
		}
		r.progressf("  [%s] %s %d/%d: %s done in %.2fs", label, name, i+1, len(steps), st.Name, res.elapsed.Seconds())
		results[st.Name] = res
	}
	return results, nil
}

// serverInfo records the server version and the effective settings that
// differ from the defaults.
func (c *cluster) serverInfo(ctx context.Context, e *Environment) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&e.ServerVersion); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, "SELECT name, current_setting(name) FROM pg_settings WHERE source NOT IN ('default', 'override') ORDER BY name")
	if err != nil {
		return err
	}
	defer rows.Close()
	e.Settings = map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		e.Settings[k] = v
	}
	return rows.Err()
}

// runtimeVars are the template variables of a cluster (see runtimeVars).
func (c *cluster) runtimeVars(clientBin string) map[string]string {
	return map[string]string{
		"workdir": c.workDir, "datadir": c.dataDir, "host": c.sockDir, "port": strconv.Itoa(c.port),
		"user": superuser, "database": "postgres", "bindir": c.binDir, "clientbin": clientBin,
	}
}

// discard stops a cluster's server and removes its directory, unless
// KeepClusters. After a cancellation the server is killed, not asked.
func (r *Runner) discard(ctx context.Context, c *cluster, sc *Scenario) {
	if c.running {
		if ctx.Err() != nil {
			c.kill()
		} else if err := c.stop(context.WithoutCancel(ctx), sc.Timeouts.Start); err != nil {
			r.log().Warn("stopping server", slog.String("cluster", c.dir), slog.String("err", err.Error()))
		}
	}
	if r.KeepClusters {
		r.log().Info("keeping cluster", slog.String("dir", c.dir))
		return
	}
	c.remove()
}

// keptKey names a kept cluster: the scenario it was set up for, the
// target, its binaries and the scaling point. The scenario is the loaded
// value, not its name: the same file loaded with other --set values needs
// clusters of its own. The key holds the pointer, so the scenario stays
// alive while its cluster is kept and no other scenario can be allocated
// at its address (a key made from the address as text once let a later
// scenario run on a collected one's cluster).
type keptKey struct {
	scenario           *Scenario
	target, bin, point string
}

// evict removes the least recently used kept clusters beyond MaxKept.
func (r *Runner) evict(ctx context.Context) {
	max := r.MaxKept
	if max <= 0 {
		max = 4
	}
	for len(r.kept) > max {
		var oldest keptKey
		var c *cluster
		for k, kc := range r.kept {
			if c == nil || kc.lastUse < c.lastUse {
				oldest, c = k, kc
			}
		}
		delete(r.kept, oldest)
		r.discard(ctx, c, oldest.scenario)
	}
}

// Close removes the clusters the Runner keeps for "restart" scenarios.
// Their servers are already stopped between samples.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, c := range r.kept {
		if c.running {
			if err := c.stop(ctx, 2*time.Minute); err != nil {
				c.kill()
			}
		}
		if !r.KeepClusters {
			c.remove()
		}
		delete(r.kept, key)
	}
	return nil
}

// osRestoreFile records the kernel settings a sample changed for its
// scenario's os: section until they are put back.
func (r *Runner) osRestoreFile() string { return filepath.Join(r.StateDir, "os-restore.json") }

func (r *Runner) user() (*proc.User, error) {
	if !proc.IsRoot() {
		return nil, nil
	}
	if r.RunAs != nil {
		return r.RunAs, nil
	}
	u, err := proc.LookupUser(proc.BenchUser)
	if err != nil {
		return nil, err
	}
	r.RunAs = u
	return u, nil
}

// dropCaches writes back dirty pages and drops the page cache, dentries
// and inodes. It warns once and returns false when it cannot.
func (r *Runner) dropCaches() bool {
	var err error
	if !proc.IsRoot() {
		err = errors.New("pgbisect is not root")
	} else {
		syscall.Sync()
		err = os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
	}
	if err != nil {
		if r.warned == nil {
			r.warned = map[string]bool{}
		}
		if !r.warned["drop_caches"] {
			r.warned["drop_caches"] = true
			r.log().Warn("cannot drop OS caches; samples of this scenario keep a warm page cache", slog.String("err", err.Error()))
		}
		return false
	}
	return true
}

func (r *Runner) progressf(format string, args ...any) {
	if r.Progress != nil {
		fmt.Fprintf(r.Progress, format+"\n", args...)
	}
}

func (r *Runner) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (s *Scenario) usesPgbench() bool {
	for _, st := range append(append([]Step(nil), s.Setup...), s.Workload...) {
		if st.Pgbench != nil {
			return true
		}
	}
	return false
}
