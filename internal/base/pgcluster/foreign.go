package pgcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// MarkerFile is the file pgbisect writes beside the data directory of every
// cluster it makes (bench: StateDir/clusters/<id>/owner.pid). A server
// without one is not pgbisect's.
const MarkerFile = "owner.pid"

// Server is a running PostgreSQL server found on the machine.
type Server struct {
	PID  int
	Data string // its data directory (the postmaster works in it)
}

// ForeignServers lists the PostgreSQL servers that u runs and pgbisect did
// not make: processes of u working in a data directory (PG_VERSION and
// postmaster.pid in their working directory) with no MarkerFile beside it.
// Such an account owns somebody's databases (Debian's postgres owns the
// system cluster and logs in to it as superuser over the peer socket), so
// a benchmark or a pull request's build run as u could read or change
// them. It reads /proc, which shows other users' working directories only
// to root; pgbisect switches users only as root.
func ForeignServers(u *proc.User) ([]Server, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	seen := map[string]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := "/proc/" + e.Name()
		fi, err := os.Stat(dir)
		if err != nil {
			continue // gone
		}
		if s, ok := fi.Sys().(*syscall.Stat_t); !ok || s.Uid != u.UID {
			continue
		}
		cwd, err := os.Readlink(dir + "/cwd")
		if err != nil || !filepath.IsAbs(cwd) || strings.HasSuffix(cwd, " (deleted)") {
			continue
		}
		if !isFile(filepath.Join(cwd, "PG_VERSION")) || !isFile(filepath.Join(cwd, "postmaster.pid")) {
			continue
		}
		if isFile(filepath.Join(filepath.Dir(cwd), MarkerFile)) {
			continue // a cluster pgbisect made
		}
		if p, ok := seen[cwd]; !ok || pid < p {
			seen[cwd] = pid // the postmaster is the oldest, lowest pid as a rule
		}
	}
	var out []Server
	for d, pid := range seen {
		out = append(out, Server{PID: pid, Data: d})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Data < out[j].Data })
	return out, nil
}

// CheckBenchUser refuses u as the user benchmarks and builds run as when
// it runs a PostgreSQL server pgbisect did not make (ForeignServers). The
// error names the server and says what to use instead.
func CheckBenchUser(u *proc.User) error {
	servers, err := ForeignServers(u)
	if err != nil {
		return err
	}
	if len(servers) == 0 {
		return nil
	}
	s := servers[0]
	more := ""
	if len(servers) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(servers)-1)
	}
	return fmt.Errorf("run_as user %q runs a PostgreSQL server pgbisect did not make (pid %d, data directory %s)%s: "+
		"a benchmark or a pull request's code run as %s could reach its databases; "+
		"set run_as to a user of its own that owns nothing else (default %s, which scripts/setup-debian.sh creates)",
		u.Name, s.PID, s.Data, more, u.Name, proc.BenchUser)
}

func isFile(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().IsRegular()
}
