package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Environment describes the machine and server a sample ran on, so that
// results from different machines or settings are never mistaken for a
// change in PostgreSQL.
type Environment struct {
	Kernel      string     `json:"kernel"`
	CPU         string     `json:"cpu"`
	Cores       int        `json:"cores"`
	MemoryBytes int64      `json:"memory_bytes"`
	Governor    string     `json:"governor"`   // CPU frequency governor, "unknown" where there is none (VMs)
	THP         string     `json:"thp"`        // transparent huge pages mode
	Filesystem  string     `json:"filesystem"` // of the data directory
	LoadAvg     [3]float64 `json:"load_avg"`   // 1, 5 and 15 minutes, at the sample's start
	// OS holds the kernel settings that shape I/O and CPU behaviour
	// (readahead, I/O scheduler, vm.dirty_*, SMT, boost), where the
	// machine has them.
	OS OSSettings `json:"os"`
	// Busy is set when the load average says other work competes for the
	// CPUs; such samples are noisy.
	Busy bool `json:"busy"`

	// Set by the runner for a sample.
	BuildOptions  string `json:"build_options,omitempty"`
	ServerVersion string `json:"server_version,omitempty"`
	// Pgbench is the pgbench that ran the sample's pgbench steps (the
	// Runner's ClientBin); "" when the scenario has none.
	Pgbench       string            `json:"pgbench,omitempty"`
	Settings      map[string]string `json:"settings,omitempty"` // effective non-default server settings
	CachesDropped bool              `json:"caches_dropped,omitempty"`
	Warnings      []string          `json:"warnings,omitempty"`
	// Counter is what counted the sample's instructions metrics (perf or
	// valgrind); "" when it has none. Counts of different counters are
	// never compared (CheckCounter).
	Counter string `json:"counter,omitempty"`
	// CPUs is where the server and pgbisect were pinned (the scenario's
	// cpus:); nil when they were not.
	CPUs *Placement `json:"cpus,omitempty"`
}

// Fingerprint describes the machine; dataDir selects the filesystem
// reported. What cannot be read is "unknown"; it never fails.
func Fingerprint(ctx context.Context, dataDir string) Environment {
	_ = ctx // reads only local files; kept for symmetry with other I/O
	e := Environment{
		Kernel:   firstLine("/proc/sys/kernel/osrelease"),
		CPU:      cpuModel(),
		Cores:    runtime.NumCPU(),
		Governor: firstLine("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
		THP:      bracketed(firstLine("/sys/kernel/mm/transparent_hugepage/enabled")),
	}
	e.MemoryBytes = memTotal()
	e.Filesystem = filesystemOf(dataDir)
	if dataDir != "" {
		e.OS = hostSys.readOS(dataDir)
	} else {
		e.OS = hostSys.readOS("/")
	}
	if f := strings.Fields(firstLine("/proc/loadavg")); len(f) >= 3 {
		for i := 0; i < 3; i++ {
			e.LoadAvg[i], _ = strconv.ParseFloat(f[i], 64)
		}
	}
	e.Busy = e.LoadAvg[0] > float64(e.Cores)/2
	if e.Busy {
		e.Warnings = append(e.Warnings, fmt.Sprintf("machine is busy: load average %.2f on %d cores; results will be noisy", e.LoadAvg[0], e.Cores))
	}
	return e
}

// String is a one-line summary for logs and reports.
func (e Environment) String() string {
	s := fmt.Sprintf("linux %s, %s, %d cores, %.1f GiB, governor %s, THP %s, %s, load %.2f",
		e.Kernel, e.CPU, e.Cores, float64(e.MemoryBytes)/(1<<30), e.Governor, e.THP, e.Filesystem, e.LoadAvg[0])
	if e.Counter != "" {
		s += ", instructions counted by " + e.Counter
	}
	if e.CPUs != nil {
		s += fmt.Sprintf(", server on CPUs %s, pgbisect and clients on %s", e.CPUs.Server, e.CPUs.Client)
	}
	return s
}

func firstLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "unknown"
	}
	return line
}

// bracketed returns the selected value of a sysfs choice ("always [madvise]
// never" -> "madvise").
func bracketed(s string) string {
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i >= 0 && j > i {
		return s[i+1 : j]
	}
	return s
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// filesystemOf returns "type device on mountpoint" for the mount holding
// path, from /proc/self/mountinfo (longest matching mount point wins).
func filesystemOf(path string) string {
	if path == "" {
		return "unknown"
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "unknown"
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	best, bestLen := "unknown", -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 2 {
			continue
		}
		mp := a[4]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > bestLen {
			best, bestLen = fmt.Sprintf("%s %s on %s", b[0], b[1], mp), len(mp)
		}
	}
	return best
}
