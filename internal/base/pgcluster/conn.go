package pgcluster

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Connections to a cluster are configured from the cluster alone: libpq's
// environment variables in pgbisect's own environment (PGPASSWORD, PGHOST,
// PGPORT, PGUSER, PGDATABASE, PGSERVICE, PGSSLMODE, PGPASSFILE, PGOPTIONS,
// PGTZ, PGREQUIREAUTH...) change nothing. pgx reads them under whatever a
// connection string leaves out, and fails on some values, so ConnString
// gives every one of them a value, and ConnConfig drops the run-time
// parameters the environment added. Programs run against a cluster get an
// environment built from nothing (Env).

// ServiceName is the libpq service pgbisect's own connections name when
// PGSERVICE is set in its environment (see ConnString).
const ServiceName = "pgbisect"

// ConnString is the keyword/value connection string of database db, with
// every setting that libpq's environment could otherwise supply.
func (c *Cluster) ConnString(db string) string {
	s := fmt.Sprintf("host=%s port=%d user=%s dbname=%s password='' passfile=%s", quoteKV(c.Socket()), c.Port, quoteKV(c.Role()), quoteKV(db), quoteKV(c.Passfile())) +
		" sslmode=disable sslkey='' sslcert='' sslrootcert='' sslpassword='' sslcertmode=allow sslsni='' sslnegotiation=postgres" +
		" connect_timeout=30 target_session_attrs=any channel_binding=disable require_auth=''" +
		" min_protocol_version=3.0 max_protocol_version=3.0 options='' application_name=pgbisect"
	if os.Getenv("PGSERVICE") != "" {
		// A service named in the environment must exist, or pgx refuses
		// to connect at all: name our own, whose file sets nothing.
		s += " service=" + ServiceName + " servicefile=" + quoteKV(c.serviceFile())
	}
	return s
}

func (c *Cluster) serviceFile() string { return filepath.Join(c.Dir, "pg_service.conf") }

// ConnConfig is pgx's configuration of a connection to database db (see
// ConnString).
func (c *Cluster) ConnConfig(db string) (*pgx.ConnConfig, error) {
	if err := c.writeServiceFile(); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(c.ConnString(db))
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster in %s: %w", c.Dir, err)
	}
	ownParams(&cfg.Config)
	return cfg, nil
}

// PoolConfig is pgxpool's configuration of connections to database db
// (see ConnString).
func (c *Cluster) PoolConfig(db string) (*pgxpool.Config, error) {
	if err := c.writeServiceFile(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(c.ConnString(db))
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster in %s: %w", c.Dir, err)
	}
	ownParams(&cfg.ConnConfig.Config)
	return cfg, nil
}

// ownParams keeps only pgbisect's own run-time parameters: PGTZ,
// PGOPTIONS, PGAPPNAME or a service's entries do not reach the server.
func ownParams(cfg *pgconn.Config) {
	cfg.RuntimeParams = map[string]string{"application_name": "pgbisect"}
}

// writeServiceFile writes the service file ConnString names when
// PGSERVICE is set: one empty service, so that the environment's service
// (and its host, user or password) is never looked up.
func (c *Cluster) writeServiceFile() error {
	if os.Getenv("PGSERVICE") == "" {
		return nil
	}
	if b, err := c.ReadFile(c.serviceFile()); err == nil && string(b) == serviceFileText {
		return nil // written once: not truncated under a concurrent reader
	}
	return c.writeFile(c.Dir, filepath.Base(c.serviceFile()), serviceFileText, 0o644, false)
}

const serviceFileText = "# pgbisect names this service in its own connections so that a PGSERVICE in its\n" +
	"# environment changes nothing; the connection string sets everything.\n[" + ServiceName + "]\n"
