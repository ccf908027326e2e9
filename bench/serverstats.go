package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server statistics are metrics read from the server (and the kernel)
// around one workload step: a counter is read before the step and after
// it, and the metric is the difference. The design choice that matters:
// every statistic is mapped per server version (columns move between
// releases), and one a server lacks is skipped with a note on the sample,
// never an error, so one scenario runs unchanged on 9.6 and on 18.

// serverValue describes one server statistic a metric's value may name.
type serverValue struct {
	unit string
	// query gives the SQL reading the counter at server version v
	// (server_version_num), or "" and why the server lacks it. Nil for
	// statistics read from /proc or by sampling.
	query func(v int) (sql, note string)
}

// serverValues are the server statistics by value name. Their direction
// defaults to "lower" (less WAL, fewer waits, less CPU is better).
var serverValues = map[string]serverValue{
	"wal_bytes":          {"bytes", walBytesQuery},
	"wal_records":        {"records", walStatQuery("wal_records")},
	"wal_fpi":            {"records", walStatQuery("wal_fpi")},
	"wal_write":          {"writes", walWriteQuery("wal_write")},
	"wal_sync":           {"syncs", walWriteQuery("wal_sync")},
	"buffers_backend":    {"blocks", buffersBackendQuery},
	"buffers_clean":      {"blocks", func(int) (string, string) { return "SELECT buffers_clean FROM pg_stat_bgwriter", "" }},
	"buffers_checkpoint": {"blocks", buffersCheckpointQuery},
	"checkpoints":        {"checkpoints", checkpointsQuery},
	"io_reads":           {"ops", ioQuery("reads")},
	"io_writes":          {"ops", ioQuery("writes")},
	"io_extends":         {"ops", ioQuery("extends")},
	"cpu_user":           {"s", nil},
	"cpu_system":         {"s", nil},
	"disk_read_bytes":    {"bytes", nil},
	"disk_write_bytes":   {"bytes", nil},
	"wait_events":        {"samples", nil},
}

// walBytesQuery reads the current WAL insert position as a byte count.
// The LSN is exact at once on every version; pg_stat_wal's wal_bytes
// (14+) lags by up to the stats flush interval of an open session.
func walBytesQuery(v int) (string, string) {
	if v < 100000 {
		return "SELECT pg_xlog_location_diff(pg_current_xlog_location(), '0/0')", ""
	}
	return "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')", ""
}

func walStatQuery(col string) func(int) (string, string) {
	return func(v int) (string, string) {
		if v < 140000 {
			return "", "pg_stat_wal is new in PostgreSQL 14"
		}
		return "SELECT " + col + " FROM pg_stat_wal", ""
	}
}

func walWriteQuery(col string) func(int) (string, string) {
	return func(v int) (string, string) {
		switch {
		case v < 140000:
			return "", "pg_stat_wal is new in PostgreSQL 14"
		case v >= 180000:
			return "", "pg_stat_wal's " + col + " left in PostgreSQL 18 (WAL I/O is in pg_stat_io)"
		}
		return "SELECT " + col + " FROM pg_stat_wal", ""
	}
}

// buffersBackendQuery: buffers_backend left pg_stat_bgwriter in 17; from
// then on the same count is pg_stat_io's writes and extends by client
// backends. Up to 16 it counted the fsync requests backends forwarded,
// which relation extensions make too: on real servers an INSERT of 345
// pages and a CHECKPOINT gave buffers_backend 352 on 13.16 and 15.18, and
// pg_stat_io 3 writes and 346 extends on 18.6 (TestReleases), so writes
// alone would read as a 99% drop between 16 and 17.
func buffersBackendQuery(v int) (string, string) {
	if v >= 170000 {
		return "SELECT coalesce(sum(writes + extends), 0) FROM pg_stat_io WHERE backend_type = 'client backend'", ""
	}
	return "SELECT buffers_backend FROM pg_stat_bgwriter", ""
}

// buffersCheckpointQuery: the checkpoint columns moved to
// pg_stat_checkpointer in 17.
func buffersCheckpointQuery(v int) (string, string) {
	if v >= 170000 {
		return "SELECT buffers_written FROM pg_stat_checkpointer", ""
	}
	return "SELECT buffers_checkpoint FROM pg_stat_bgwriter", ""
}

func checkpointsQuery(v int) (string, string) {
	if v >= 170000 {
		return "SELECT num_timed + num_requested FROM pg_stat_checkpointer", ""
	}
	return "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter", ""
}

func ioQuery(col string) func(int) (string, string) {
	return func(v int) (string, string) {
		if v < 160000 {
			return "", "pg_stat_io is new in PostgreSQL 16"
		}
		return "SELECT coalesce(sum(" + col + "), 0) FROM pg_stat_io", ""
	}
}

// waitQuery lists the waits of the active sessions other than the
// sampler's own (backend_type is 10+; before it pg_stat_activity held
// client backends only).
func waitQuery(v int) string {
	q := "SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active' AND wait_event IS NOT NULL"
	if v >= 100000 {
		q += " AND backend_type = 'client backend'"
	}
	return q
}

// defaultWaitInterval is how often wait events are sampled when the
// metric gives no interval.
const defaultWaitInterval = 10 * time.Millisecond

// key is where a metric's value sits in a step's results: the value
// name, and for wait events the event too.
func (m Metric) key() string {
	if m.Value == "wait_events" {
		return "wait_events:" + m.WaitEvent
	}
	return m.Value
}

// probe measures the server statistics of one step: start reads the
// counters before it, finish after it.
type probe struct {
	c       *cluster
	metrics []Metric
	conn    *pgx.Conn
	version int
	before  map[string]float64
	notes   map[string]string

	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	waits   map[string]int // "Type:Event" -> samples
	polls   int
	pollErr error
}

// startProbe reads the counters of the step's server metrics and starts
// sampling wait events if a metric asks. It returns nil when the step has
// no server metrics.
func startProbe(ctx context.Context, c *cluster, metrics []Metric) (*probe, error) {
	if len(metrics) == 0 {
		return nil, nil
	}
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("server statistics: %w", err)
	}
	p := &probe{c: c, metrics: metrics, conn: conn, notes: map[string]string{}}
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&p.version); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("server statistics: reading the server version: %w", err)
	}
	if err := p.settle(ctx); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if p.before, err = p.read(ctx); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	var interval time.Duration
	for _, m := range metrics {
		if m.Value == "wait_events" && (interval == 0 || m.Interval < interval) {
			interval = m.Interval
		}
	}
	if interval > 0 {
		p.stop, p.done, p.waits = make(chan struct{}), make(chan struct{}), map[string]int{}
		go p.sample(ctx, interval)
	}
	return p, nil
}

// sample polls pg_stat_activity every interval until stopped, counting
// the sessions seen waiting per event.
func (p *probe) sample(ctx context.Context, interval time.Duration) {
	defer close(p.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	q := waitQuery(p.version)
	for {
		rows, err := p.conn.Query(ctx, q)
		if err == nil {
			var typ, ev string
			_, err = pgx.ForEachRow(rows, []any{&typ, &ev}, func() error {
				p.mu.Lock()
				p.waits[typ+":"+ev]++
				p.mu.Unlock()
				return nil
			})
		}
		p.mu.Lock()
		p.polls++
		if err != nil && p.pollErr == nil && ctx.Err() == nil {
			p.pollErr = err
		}
		p.mu.Unlock()
		select {
		case <-p.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// finish stops sampling, reads the counters again and puts each metric's
// difference (or the note why the server lacks it) into res.
func (p *probe) finish(ctx context.Context, res *stepResult) error {
	defer p.conn.Close(context.WithoutCancel(ctx))
	if p.stop != nil {
		close(p.stop)
		<-p.done
	}
	if err := p.settle(ctx); err != nil {
		return err
	}
	after, err := p.read(ctx)
	if err != nil {
		return err
	}
	if res.notes == nil {
		res.notes = map[string]string{}
	}
	for _, m := range p.metrics {
		k := m.key()
		if m.Value == "wait_events" {
			if p.pollErr != nil {
				return fmt.Errorf("server statistics: sampling wait events: %w", p.pollErr)
			}
			res.values[k] = float64(countWaits(p.waits, m.WaitEvent))
			continue
		}
		if n, ok := p.notes[m.Value]; ok {
			res.notes[k] = n
			continue
		}
		res.values[k] = after[m.Value] - p.before[m.Value]
	}
	return nil
}

// collectorLag is how long a server before 15 may take to show a count in
// its statistics views: processes send their counts to the statistics
// collector (the checkpointer after CHECKPOINT has returned to its
// client), which writes them to a file that readers accept up to
// PGSTAT_STAT_INTERVAL (500 ms) old. Found on a real 13.16: a CHECKPOINT
// step read 0 checkpoints and 0 buffers_checkpoint without the wait. From
// 15 on the counts are in shared memory.
const collectorLag = time.Second

// settle waits collectorLag before a read of counters that a server
// before 15 reports through its statistics collector (every statistic
// from a view; not the WAL position, /proc or sampled waits), so that
// each read holds what happened before it.
func (p *probe) settle(ctx context.Context) error {
	if p.version >= 150000 {
		return nil
	}
	collected := false
	for _, m := range p.metrics {
		if sv := serverValues[m.Value]; sv.query != nil && m.Value != "wal_bytes" {
			collected = true
		}
	}
	if !collected {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(collectorLag):
		return nil
	}
}

// flushSession makes pgbisect's own session, which the sql, copy and
// explain steps ran in and which stays open, report its pending
// statistics (pg_stat_wal, pg_stat_io) before the counters are read
// again: from 15 on a session flushes them at most once a second and up
// to 10 s after it goes idle, and pg_stat_force_next_flush() makes it do
// so at the end of that statement. Found on a real 18.6: an INSERT of 345
// pages read 0 client-backend extends in pg_stat_io without it. Before 15
// the collector's lag is settle's. A step that ran elsewhere (pgbench,
// shell: their sessions flush when they exit) needs nothing.
func (p *probe) flushSession(ctx context.Context, conn *pgx.Conn) error {
	if p.version < 150000 || conn == nil {
		return nil
	}
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		return fmt.Errorf("server statistics: flushing the session's statistics: %w", err)
	}
	return nil
}

// countWaits sums the samples of the events matching want: "" matches
// every wait, "Lock" every event of that type, "Lock:advisory" one event.
func countWaits(waits map[string]int, want string) int {
	n := 0
	for ev, c := range waits {
		typ, _, _ := strings.Cut(ev, ":")
		if want == "" || want == ev || want == typ {
			n += c
		}
	}
	return n
}

// read reads every counter the probe's metrics need.
func (p *probe) read(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	for _, m := range p.metrics {
		if _, done := out[m.Value]; done {
			continue
		}
		if _, skipped := p.notes[m.Value]; skipped {
			continue
		}
		var v float64
		var note string
		var err error
		switch m.Value {
		case "wait_events":
			continue
		case "cpu_user", "cpu_system":
			pm := p.c.postmasterPID()
			if pm <= 0 {
				return nil, fmt.Errorf("server statistics: no postmaster.pid in %s", p.c.dataDir)
			}
			user, sys := familyCPU(pm)
			v = user
			if m.Value == "cpu_system" {
				v = sys
			}
		case "disk_read_bytes", "disk_write_bytes":
			var rd, wr float64
			rd, wr, note = diskBytes(p.c.dataDir)
			v = rd
			if m.Value == "disk_write_bytes" {
				v = wr
			}
		default:
			v, note, err = p.queryCounter(ctx, m.Value)
		}
		if err != nil {
			return nil, err
		}
		if note != "" {
			p.notes[m.Value] = note
			continue
		}
		out[m.Value] = v
	}
	return out, nil
}

func (p *probe) queryCounter(ctx context.Context, value string) (float64, string, error) {
	sql, note := serverValues[value].query(p.version)
	if sql == "" {
		return 0, note, nil
	}
	var text string
	if err := p.conn.QueryRow(ctx, "SELECT ("+sql+")::text").Scan(&text); err != nil {
		return 0, "", fmt.Errorf("server statistics: %s: %w", value, err)
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, "", fmt.Errorf("server statistics: %s: %q is not a number", value, text)
	}
	return v, "", nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times; it is 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// familyCPU is the user and system CPU seconds of the postmaster, its
// running children, and the children it has reaped (cutime, cstime):
// a backend that exits during the step moves its time from the second
// term to the third, so differences stay whole.
func familyCPU(pm int) (user, sys float64) {
	add := func(pid int) {
		f := statFields(pid)
		if len(f) < 15 {
			return
		}
		// Fields after "(comm)": state=0 ppid=1 ... utime=11 stime=12 cutime=13 cstime=14.
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		cu, _ := strconv.ParseFloat(f[13], 64)
		cs, _ := strconv.ParseFloat(f[14], 64)
		user += u + cu
		sys += s + cs
	}
	add(pm)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pm {
			continue
		}
		// Zombies count: their time is not yet in the postmaster's cutime.
		if f := statFields(pid); len(f) > 1 && f[1] == strconv.Itoa(pm) {
			add(pid)
		}
	}
	return user / clockTicks, sys / clockTicks
}

// statFields splits /proc/PID/stat after the command name.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// diskBytes is the bytes read and written so far by the block device
// holding dir, from /proc/diskstats (sectors of 512 bytes), or a note
// saying why there is none (an overlay or tmpfs has no block device).
func diskBytes(dir string) (read, written float64, note string) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, 0, fmt.Sprintf("cannot stat the data directory: %v", err)
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^0xfff
	minor := dev&0xff | (dev>>12)&^0xff
	return diskstatsFor("/proc/diskstats", major, minor)
}

func diskstatsFor(path string, major, minor uint64) (read, written float64, note string) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Sprintf("cannot read %s: %v", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 10 || fl[0] != strconv.FormatUint(major, 10) || fl[1] != strconv.FormatUint(minor, 10) {
			continue
		}
		r, _ := strconv.ParseFloat(fl[5], 64)
		w, _ := strconv.ParseFloat(fl[9], 64)
		return r * 512, w * 512, ""
	}
	return 0, 0, fmt.Sprintf("the data directory's device %d:%d is not in %s (an overlay, tmpfs or network filesystem has no disk statistics)", major, minor, filepath.Base(path))
}

// serverMetrics groups the scenario's server-statistic metrics by step.
func (s *Scenario) serverMetrics() map[string][]Metric {
	out := map[string][]Metric{}
	for _, m := range s.metrics {
		if _, ok := serverValues[m.Value]; ok {
			out[m.Step] = append(out[m.Step], m)
		}
	}
	return out
}

// serverValueNames lists the server statistics, sorted.
func serverValueNames() []string {
	names := make([]string, 0, len(serverValues))
	for n := range serverValues {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
