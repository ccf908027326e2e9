package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/store"
)

func init() {
	register(command{Name: "db", Summary: "manage the results database (start|stop|status|url|migrate|psql|import)", Run: runDB})
}

const dbUsage = `ACTION [flags]

Actions:
  start     start the private results cluster (created on first use) and migrate it
  stop      stop the private results cluster
  status    show where the results are, whether the cluster runs, and what the database holds
  url       print the connection URL: psql "$(pgbisect db url)"
  migrate   apply the schema migrations this pgbisect has and the database lacks
  psql      run psql on the results database; psql's own flags go after --:
            pgbisect db psql -- -c 'SELECT * FROM findings'
  import    load the bisections and findings an older pgbisect kept in files
            (STATE/bisections, STATE/findings) into the results store, once:
            pgbisect db import [--state-dir DIR]

With no database configured (config db, --db, PGBISECT_DB) the results live in
a private PostgreSQL cluster under STATE/db, listening only on a unix socket
in STATE/db/run.`

func runDB(ctx context.Context, env *Env) error {
	if len(env.Args) > 0 && env.Args[0] == "import" {
		sub := *env
		sub.Args = env.Args[1:]
		return dbImport(ctx, &sub)
	}
	fs := newFlags(env, "db", dbUsage)
	flags := addStoreFlags(fs)
	pos, err := parseFlags(fs, env)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return usageError("give an action: start, stop, status, url, migrate or psql")
	}
	action, rest := pos[0], pos[1:]
	if action != "psql" && len(rest) > 0 {
		return usageError("db %s takes no arguments, got %q", action, rest)
	}
	cfg, err := flags.load(env.Stderr)
	if err != nil {
		return err
	}
	cluster, err := store.NewCluster(cfg.StateDir, cfg.DBRunAs, env.Log)
	if err != nil {
		return err
	}
	url := cfg.DB
	if url == "" {
		url = cluster.URL()
	}
	private := cfg.DB == ""
	needPrivate := func() error {
		if private {
			return nil
		}
		return fmt.Errorf("the results database is %s (from --db, PGBISECT_DB or the config): db %s manages only the private cluster", app.RedactURL(cfg.DB), action)
	}

	switch action {
	case "start":
		if err := needPrivate(); err != nil {
			return err
		}
		// Open starts the cluster and migrates, so psql finds the tables.
		s, err := store.Open(ctx, store.Config{StateDir: cfg.StateDir, RunAs: cfg.DBRunAs, Log: env.Log})
		if err != nil {
			return err
		}
		s.Close()
		fmt.Fprintf(env.Stderr, "results cluster running in %s\n", cluster.Dir)
		fmt.Fprintln(env.Stdout, url)
		return nil
	case "stop":
		if err := needPrivate(); err != nil {
			return err
		}
		return cluster.Stop(ctx)
	case "status":
		return dbStatus(ctx, env, cluster, url, private)
	case "url":
		fmt.Fprintln(env.Stdout, url)
		return nil
	case "migrate":
		s, err := store.Open(ctx, store.Config{URL: cfg.DB, StateDir: cfg.StateDir, RunAs: cfg.DBRunAs, Log: env.Log})
		if err != nil {
			return err
		}
		s.Close()
		fmt.Fprintf(env.Stdout, "schema version %d\n", store.SchemaVersion())
		return nil
	case "psql":
		if private {
			// Start and migrate, so the tables are there to look at.
			s, err := store.Open(ctx, store.Config{StateDir: cfg.StateDir, RunAs: cfg.DBRunAs, Log: env.Log})
			if err != nil {
				return err
			}
			cluster = s.Cluster()
			s.Close()
		}
		return dbPsql(cluster, url, rest)
	default:
		return usageError("unknown action %q: use start, stop, status, url, migrate or psql", action)
	}
}

func dbStatus(ctx context.Context, env *Env, cluster *store.Cluster, url string, private bool) error {
	w := env.Stdout
	running := true
	if private {
		st, err := cluster.Status(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "results database: private cluster in %s\n", cluster.Dir)
		switch {
		case !st.Initialized:
			fmt.Fprintln(w, "state:   not created yet (pgbisect db start, or any command that stores results, creates it)")
		case st.Running:
			fmt.Fprintf(w, "state:   running (pid %d), PostgreSQL %s, log %s\n", st.PID, st.Version, cluster.LogFile())
		case st.Stale:
			fmt.Fprintf(w, "state:   stopped; a stale postmaster.pid from a crash is left (the next start removes it), PostgreSQL %s\n", st.Version)
		case st.PID != 0:
			fmt.Fprintf(w, "state:   not accepting connections (pid %d), PostgreSQL %s: %v\n", st.PID, st.Version, st.Err)
			return fmt.Errorf("the results cluster's server (pid %d) does not accept pgbisect's connections: %v (starting or stopping: try again; otherwise see %s)",
				st.PID, st.Err, cluster.LogFile())
		default:
			fmt.Fprintf(w, "state:   stopped, PostgreSQL %s\n", st.Version)
		}
		running = st.Running
	} else {
		fmt.Fprintf(w, "results database: %s\n", app.RedactURL(url))
	}
	fmt.Fprintf(w, "url:     %s\n", app.RedactURL(url))
	if !running {
		fmt.Fprintf(w, "schema:  this pgbisect has version %d\n", store.SchemaVersion())
		return nil
	}
	var sum store.Summary
	var err error
	if private {
		sum, err = cluster.Summarize(ctx)
	} else {
		sum, err = store.Summarize(ctx, url)
	}
	if err != nil {
		return err
	}
	switch {
	case sum.Version == 0:
		fmt.Fprintf(w, "schema:  not migrated yet (this pgbisect has version %d; pgbisect db migrate applies it)\n", store.SchemaVersion())
	case sum.Version > store.SchemaVersion():
		fmt.Fprintf(w, "schema:  version %d, NEWER than this pgbisect's %d: upgrade pgbisect\n", sum.Version, store.SchemaVersion())
	default:
		fmt.Fprintf(w, "schema:  version %d (this pgbisect: %d)\n", sum.Version, store.SchemaVersion())
	}
	if sum.Rows != nil {
		var parts []string
		for _, t := range store.SummaryTables() {
			parts = append(parts, fmt.Sprintf("%s %d", t, sum.Rows[t]))
		}
		fmt.Fprintf(w, "rows:    %s\n", strings.Join(parts, ", "))
		fmt.Fprintf(w, "queue:   %d queued, %d running; %d findings not posted yet\n", sum.QueuedJobs, sum.RunningJobs, sum.PendingFindings)
	}
	fmt.Fprintln(w, "psql:    pgbisect db psql")
	return nil
}

// dbPsql replaces pgbisect with psql on the results database. Exec rather
// than a child: an interactive psql must own the terminal (its own process
// group would be stopped by SIGTTIN), and Ctrl-C must reach psql, which
// uses it to cancel a query.
// psqlVars are the variables psql reads for interactive use (pager, editor,
// startup file, history, terminal size, encoding): psql gets them besides
// the allowlist every child gets (proc.Env), never the GitHub token, the
// web token or a database password. The URL names the database.
var psqlVars = []string{"PAGER", "PSQL_PAGER", "PSQL_WATCH_PAGER", "PSQLRC", "PSQL_HISTORY",
	"PSQL_EDITOR", "PSQL_EDITOR_LINENUMBER_ARG", "EDITOR", "VISUAL", "COLUMNS", "LINES", "PGCLIENTENCODING"}

func psqlEnv() []string {
	var extra []string
	for _, k := range psqlVars {
		if v, ok := os.LookupEnv(k); ok {
			extra = append(extra, k+"="+v)
		}
	}
	return proc.Env(extra...)
}

func dbPsql(cluster *store.Cluster, url string, args []string) error {
	psql := ""
	if cluster.BinDir != "" {
		psql = filepath.Join(cluster.BinDir, "psql")
	} else if d, err := store.FindBinDir(""); err == nil {
		psql = filepath.Join(d, "psql")
	}
	if _, err := os.Stat(psql); psql == "" || err != nil {
		p, err := exec.LookPath("psql")
		if err != nil {
			return errors.New("psql not found: install postgresql-client-15 (apt-get install postgresql-client-15)")
		}
		psql = p
	}
	argv := append([]string{"psql", url}, args...)
	if err := syscall.Exec(psql, argv, psqlEnv()); err != nil {
		return fmt.Errorf("running %s: %w", psql, err)
	}
	return nil
}
