package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/pgcluster"
	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// debianBinGlob is where Debian's postgresql-NN packages put the server
// binaries, one directory per major version.
const debianBinGlob = "/usr/lib/postgresql/*/bin"

// FindBinDir returns a directory holding initdb, pg_ctl and postgres of the
// given major version ("15"), or of the newest installed version when major
// is empty. It looks at $PGBISECT_PG_BINDIR, then Debian's
// /usr/lib/postgresql/NN/bin, then `pg_config --bindir`, then the PATH.
func FindBinDir(major string) (string, error) {
	var cands []string
	if d := os.Getenv("PGBISECT_PG_BINDIR"); d != "" {
		cands = append(cands, d)
	}
	debian, _ := filepath.Glob(debianBinGlob)
	sort.Slice(debian, func(i, j int) bool { return debianMajor(debian[i]) > debianMajor(debian[j]) })
	cands = append(cands, debian...)
	// pg_config is whatever the PATH holds: bounded like every child.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	out, err := proc.Command(ctx, nil, "pg_config", "--bindir").Output()
	cancel()
	if err == nil {
		cands = append(cands, strings.TrimSpace(string(out)))
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		cands = append(cands, filepath.Dir(p))
	}
	var found []string
	for _, d := range cands {
		if pgcluster.CheckBinDir(d) != nil {
			continue
		}
		v, err := serverMajor(d)
		if err != nil {
			continue
		}
		if major == "" || v == major {
			return d, nil
		}
		found = append(found, fmt.Sprintf("%s (%s)", d, v))
	}
	if major != "" && len(found) > 0 {
		return "", fmt.Errorf("the results cluster was created by PostgreSQL %s, but only %s is installed: install postgresql-%s (apt-get install postgresql-%s), or upgrade the cluster with pg_upgrade",
			major, strings.Join(found, ", "), major, major)
	}
	want := "postgresql-15"
	if major != "" {
		want = "postgresql-" + major
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl, postgres) found in $PGBISECT_PG_BINDIR, %s, pg_config --bindir or PATH: install them (apt-get install %s, or run scripts/setup-debian.sh), or give a results database with --db URL",
		debianBinGlob, want)
}

func (c *Cluster) findBinDir(major string) error {
	if c.BinDir != "" {
		return nil
	}
	d, err := FindBinDir(major)
	if err != nil {
		return err
	}
	c.BinDir = d
	return nil
}

func debianMajor(dir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
	return v
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)(?:\.(\d+))?`)

// serverMajor runs "postgres --version" in dir: "15" for 15.x, "9.6" for
// the old two-part majors.
func serverMajor(dir string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := proc.Command(ctx, nil, filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil {
		return "", err
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return "", errors.New("unrecognised postgres --version output: " + strings.TrimSpace(string(out)))
	}
	if n, _ := strconv.Atoi(m[1]); n < 10 && m[2] != "" {
		return m[1] + "." + m[2], nil
	}
	return m[1], nil
}
