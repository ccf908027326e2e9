package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// servers remembers what each target's postgres said about itself, by bin
// directory, and which setting notes were shown.
type servers struct {
	byBin map[string]*Server
	noted map[string]bool
}

// server describes the postgres of binDir once.
func (r *Runner) server(ctx context.Context, binDir string, u *proc.User) (*Server, error) {
	if srv := r.servers.byBin[binDir]; srv != nil {
		return srv, nil
	}
	srv, err := DescribeServer(ctx, binDir, u)
	if err != nil {
		return nil, err
	}
	if r.servers.byBin == nil {
		r.servers.byBin = map[string]*Server{}
	}
	r.servers.byBin[binDir] = srv
	return srv, nil
}

// Check reads every target's server version and settings (postgres
// --version and --describe-config) and resolves the scenario's settings at
// pt for each, so that a setting one of them does not know stops a
// comparison before any sample is measured. Run does the same for its own
// target before every initdb.
func (r *Runner) Check(ctx context.Context, sc *Scenario, targets []Target, pt Point) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, err := r.user()
	if err != nil {
		return err
	}
	if !sc.OS.Empty() {
		if _, err := hostSys.planOS(r.StateDir, sc.OS); err != nil {
			return err
		}
	}
	own := map[string]string{"port": "5432", "listen_addresses": "", "unix_socket_directories": "/tmp", "unix_socket_permissions": "0700"}
	for _, t := range targets {
		exp, err := sc.expand(pt, placeholderRuntime)
		if err != nil {
			return err
		}
		if _, err := r.serverSettings(ctx, sc, t, u, exp, own); err != nil {
			return err
		}
	}
	return nil
}

// serverSettings resolves the expanded settings for t's server (see
// Server.Resolve) and shows what was mapped, once per target and note.
func (r *Runner) serverSettings(ctx context.Context, sc *Scenario, t Target, u *proc.User, exp *expanded, own map[string]string) (map[string]string, error) {
	srv, err := r.server(ctx, t.BinDir, u)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	if err := sc.checkVersion(srv.Version); err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	res, err := srv.Resolve(ctx, exp.settings, exp.byVersion, own)
	if err != nil {
		var se *SettingError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("target %s: %s: %w", t.Name, sc.where("$.settings."+se.Name), err)
		}
		return nil, fmt.Errorf("target %s: %s: %w", t.Name, sc.File, err)
	}
	if r.servers.noted == nil {
		r.servers.noted = map[string]bool{}
	}
	for _, n := range res.Notes {
		if !r.servers.noted[t.BinDir+"\x00"+n] {
			r.servers.noted[t.BinDir+"\x00"+n] = true
			r.progressf("  [%s] %s", t.Name, n)
		}
	}
	return res.Settings, nil
}

// ownSettings are the settings the cluster itself writes to
// postgresql.conf (see initdb), probed with the scenario's.
func (c *cluster) ownSettings() map[string]string {
	return map[string]string{"port": strconv.Itoa(c.port), "listen_addresses": "", "unix_socket_directories": c.sockDir, "unix_socket_permissions": "0700"}
}
