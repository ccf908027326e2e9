package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// CPUSpec is a scenario's cpus: section (issue 30 item 8): the CPUs the
// benchmark server and its clients run on, so that they do not share a
// CPU with each other, nor the server with pgbisect. For each sample
// pgbisect pins every thread of its own process to Client (the clients it
// starts, pgbench, psql and shell steps, inherit that, and its own
// connections, COPY and SQL steps, run there), and the server's
// postmaster and every process it has to Server (the backends and
// parallel workers it forks later inherit it). Afterwards pgbisect's own
// threads get their CPUs back. Each sample records the placement it ran
// with (Environment.CPUs), read back from /proc.
//
// It does not keep other programs off those CPUs: on a machine shared
// with other work, a cgroup cpuset or isolcpus does that, which pgbisect
// does not set up. Default: none, every process runs on every CPU.
type CPUSpec struct {
	// Server is the CPU list of the server ("1", "2-3", "0,2").
	Server string `yaml:"server"`
	// Client is the CPU list of pgbisect and the clients it starts.
	Client string `yaml:"client"`
}

// Placement is where a sample's processes were allowed to run, as
// /proc/PID/status said (Cpus_allowed_list) after pinning.
type Placement struct {
	Server string `json:"server"` // of the postmaster
	Client string `json:"client"` // of pgbisect
}

// Empty reports whether the spec pins nothing.
func (c CPUSpec) Empty() bool { return c.Server == "" && c.Client == "" }

// String is "server 1, client 0".
func (c CPUSpec) String() string { return "server " + c.Server + ", client " + c.Client }

func (c CPUSpec) validate() error {
	if c.Empty() {
		return nil
	}
	for _, f := range []struct{ name, list string }{{"server", c.Server}, {"client", c.Client}} {
		if f.list == "" {
			return errAt("$.cpus", "cpus: give both server and client CPU lists (e.g. server: \"1\", client: \"0\"), or leave cpus out")
		}
		if _, err := parseCPUList(f.list); err != nil {
			return errAt("$.cpus."+f.name, "%v", err)
		}
	}
	return nil
}

// ParseCPUSpec reads "server=LIST,client=LIST" ("server=1,client=0",
// "server=2-3,client=0,1": an item without "=" continues the list before
// it), or "off" for none.
func ParseCPUSpec(s string) (CPUSpec, error) {
	if s == "off" {
		return CPUSpec{}, nil
	}
	var c CPUSpec
	var to *string
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(item, "=")
		switch {
		case ok && k == "server":
			to = &c.Server
		case ok && k == "client":
			to = &c.Client
		case !ok && to != nil:
			v = *to + "," + item
		default:
			return CPUSpec{}, fmt.Errorf("cpus %q: want server=LIST,client=LIST (e.g. server=1,client=0) or off", s)
		}
		*to = v
	}
	if c.Server == "" || c.Client == "" {
		return CPUSpec{}, fmt.Errorf("cpus %q: give both server= and client= (e.g. server=1,client=0), or off", s)
	}
	for _, l := range []string{c.Server, c.Client} {
		if _, err := parseCPUList(l); err != nil {
			return CPUSpec{}, err
		}
	}
	return c, nil
}

// cpuSet is a kernel CPU mask (up to 1024 CPUs).
type cpuSet [16]uint64

func (s *cpuSet) set(cpu int)      { s[cpu/64] |= 1 << (cpu % 64) }
func (s *cpuSet) has(cpu int) bool { return s[cpu/64]&(1<<(cpu%64)) != 0 }

// parseCPUList reads a kernel CPU list ("0", "0-3", "0,2-3").
func parseCPUList(list string) (cpuSet, error) {
	var s cpuSet
	bad := func() (cpuSet, error) {
		return cpuSet{}, fmt.Errorf("CPU list %q: use CPU numbers and ranges such as 1, 2-3 or 0,2", list)
	}
	if strings.TrimSpace(list) == "" {
		return bad()
	}
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		b, errB := a, error(nil)
		if isRange {
			b, errB = strconv.Atoi(hi)
		}
		if err != nil || errB != nil || a < 0 || b < a || b >= len(s)*64 {
			return bad()
		}
		for cpu := a; cpu <= b; cpu++ {
			s.set(cpu)
		}
	}
	return s, nil
}

func (s cpuSet) list() string {
	var parts []string
	for cpu := 0; cpu < len(s)*64; cpu++ {
		if !s.has(cpu) {
			continue
		}
		end := cpu
		for end+1 < len(s)*64 && s.has(end+1) {
			end++
		}
		if end == cpu {
			parts = append(parts, strconv.Itoa(cpu))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpu, end))
		}
		cpu = end
	}
	return strings.Join(parts, ",")
}

func getAffinity(tid int) (cpuSet, error) {
	var s cpuSet
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, uintptr(tid), unsafe.Sizeof(s), uintptr(unsafe.Pointer(&s)))
	if e != 0 {
		return s, e
	}
	return s, nil
}

func setAffinity(tid int, s cpuSet) error {
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(s), uintptr(unsafe.Pointer(&s)))
	if e != 0 {
		return e
	}
	return nil
}

// checkCPUs returns the sets of spec, or an error naming the CPUs this
// process may use when spec names others.
func checkCPUs(spec CPUSpec) (server, client cpuSet, err error) {
	mine, err := getAffinity(0)
	if err != nil {
		return server, client, fmt.Errorf("reading pgbisect's CPUs: %w", err)
	}
	for _, f := range []struct {
		name, list string
		to         *cpuSet
	}{{"server", spec.Server, &server}, {"client", spec.Client, &client}} {
		s, err := parseCPUList(f.list)
		if err != nil {
			return server, client, err
		}
		for i := range s {
			if s[i]&^mine[i] != 0 {
				return server, client, fmt.Errorf("cpus: %s CPUs %s are not all available: this machine lets pgbisect use CPUs %s (%d online)",
					f.name, f.list, mine.list(), runtime.NumCPU())
			}
		}
		*f.to = s
	}
	return server, client, nil
}

// pinSelf pins every thread of pgbisect to s and returns the function that
// gives them their CPUs back. Threads the runtime starts meanwhile inherit
// the pinned mask of the thread that starts them, so the threads are
// walked twice.
func pinSelf(s cpuSet) (restore func(), err error) {
	orig, err := getAffinity(0)
	if err != nil {
		return nil, fmt.Errorf("reading pgbisect's CPUs: %w", err)
	}
	apply := func(to cpuSet) error {
		for range 2 {
			for _, tid := range tasks() {
				if err := setAffinity(tid, to); err != nil && err != syscall.ESRCH {
					return err
				}
			}
		}
		return nil
	}
	restore = func() { _ = apply(orig) }
	if err := apply(s); err != nil {
		restore()
		return nil, fmt.Errorf("pinning pgbisect to CPUs %s: %w", s.list(), err)
	}
	return restore, nil
}

// tasks lists the thread ids of this process.
func tasks() []int {
	entries, _ := os.ReadDir("/proc/self/task")
	var ids []int
	for _, e := range entries {
		if id, err := strconv.Atoi(e.Name()); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// pinTree pins the process pid, all its threads and all its descendants
// to s. New children inherit the mask of the thread that forks them.
func pinTree(pid int, s cpuSet) error {
	seen := map[int]bool{}
	var walk func(int) error
	walk = func(p int) error {
		if seen[p] {
			return nil
		}
		seen[p] = true
		entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		if err != nil {
			return nil // gone
		}
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if err := setAffinity(tid, s); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("pinning process %d to CPUs %s: %w", p, s.list(), err)
			}
		}
		for _, c := range children(p) {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(pid)
}

// cpusAllowed reads Cpus_allowed_list from /proc/PID/status ("self" for
// pgbisect), or "" when it cannot.
func cpusAllowed(pid string) string {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// pinServer pins the server of c to s, checks it took effect and returns
// the placement to record.
func pinServer(c *cluster, server, client cpuSet) (*Placement, error) {
	pid := c.postmasterPID()
	if pid == 0 {
		return nil, fmt.Errorf("pinning the server: no postmaster.pid in %s", c.dataDir)
	}
	if err := pinTree(pid, server); err != nil {
		return nil, err
	}
	p := &Placement{Server: cpusAllowed(strconv.Itoa(pid)), Client: cpusAllowed("self")}
	if want := server.list(); p.Server != want {
		return nil, fmt.Errorf("pinning the server: its postmaster %d may run on CPUs %q, not %s", pid, p.Server, want)
	}
	if want := client.list(); p.Client != want {
		return nil, fmt.Errorf("pinning pgbisect: it may run on CPUs %q, not %s", p.Client, want)
	}
	return p, nil
}
