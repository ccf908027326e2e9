package pgcluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/user"
	"sort"
	"strings"

	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// Reserved reports whether a server setting is the cluster's own: where it
// listens, who may connect and how, where the server reads its
// configuration, and what code or commands it runs. A scenario that sets
// one is refused, whether or not the server it runs on knows the name.
func Reserved(name string) bool { return ReservedWhy(name) != "" }

// ReservedWhy says why a setting is the cluster's own ("" when it is not):
// the category Reserved refuses it for.
func ReservedWhy(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	switch {
	case n == "include", n == "include_if_exists", n == "include_dir", n == "config_file", n == "data_directory",
		n == "hba_file", n == "ident_file", n == "external_pid_file":
		return "where the server reads its configuration"
	case n == "listen_addresses", n == "port", strings.HasPrefix(n, "unix_socket_"):
		return "where the server listens"
	case strings.HasPrefix(n, "ssl"), n == "password_encryption", strings.HasPrefix(n, "krb_"),
		n == "db_user_namespace", n == "authentication_timeout", n == "scram_iterations",
		n == "gss_accept_delegation", n == "md5_password_warnings", n == "oauth_validator_libraries":
		return "who may connect and how"
	case strings.HasSuffix(n, "_preload_libraries"), n == "dynamic_library_path", n == "jit_provider",
		n == "extension_control_path", n == "archive_library":
		return "what code the server loads"
	case n == "archive_command", n == "restore_command", n == "archive_cleanup_command", n == "recovery_end_command",
		n == "primary_conninfo":
		return "what commands the server runs and where it connects"
	}
	return ""
}

// CheckSettings refuses settings that Reserved names, naming the first.
func CheckSettings(settings map[string]string) error {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if Reserved(k) {
			return &ReservedError{Name: k}
		}
	}
	return nil
}

// ReservedError is a setting a scenario may not change.
type ReservedError struct{ Name string }

func (e *ReservedError) Error() string {
	return fmt.Sprintf("setting %s is pgbisect's own (%s): remove it from the scenario", e.Name, ReservedWhy(e.Name))
}

// WriteAccess writes pg_hba.conf (and pg_ident.conf for Peer) into the
// data directory data: local socket connections only, none trusted.
func (c *Cluster) WriteAccess(data string) error {
	var hba string
	switch c.auth() {
	case Password:
		hba = "# pgbisect: unix socket only (mode 0700 directory), password from the passfile.\n" +
			"local all all scram-sha-256\n"
	case Peer:
		hba = "# pgbisect: unix socket only (mode 0700 directory), OS users of pg_ident.conf's map.\n" +
			"local all all peer map=pgbisect\n"
		var ident strings.Builder
		ident.WriteString("# pgbisect: the OS users that may connect, all as the superuser.\n")
		for _, name := range c.peerUsers() {
			fmt.Fprintf(&ident, "pgbisect %s %s\n", name, c.Role())
		}
		if err := c.writeFile(data, "pg_ident.conf", ident.String(), 0o600, false); err != nil {
			return err
		}
	}
	return c.writeFile(data, "pg_hba.conf", hba, 0o600, false)
}

// peerUsers are the OS users Peer admits: the server's, pgbisect's own
// and PeerUsers.
func (c *Cluster) peerUsers() []string {
	seen := map[string]bool{}
	var names []string
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	if c.User != nil && proc.IsRoot() {
		add(c.User.Name)
	}
	if u, err := user.Current(); err == nil {
		add(u.Username)
	}
	for _, n := range c.PeerUsers {
		add(n)
	}
	return names
}

// WritePassfile writes the passfile clients read: any host, port and
// database, the superuser, the password.
func (c *Cluster) WritePassfile(password string) error {
	return c.writeFile(c.Dir, "passfile", fmt.Sprintf("*:*:*:%s:%s\n", c.Role(), password), 0o600, false)
}

// NewPassword returns a random password (128 bits, hex).
func NewPassword() string { return newPassword() }

func newPassword() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// URL is the connection URL of database db, for pgx and psql; it names
// the passfile, never the password.
func (c *Cluster) URL(db string) string {
	esc := strings.NewReplacer("%", "%25", " ", "%20", "&", "%26", "#", "%23", "=", "%3D", "?", "%3F", "+", "%2B")
	u := fmt.Sprintf("postgresql:///%s?host=%s&port=%d&user=%s", db, esc.Replace(c.Socket()), c.Port, c.Role())
	if c.auth() == Password {
		u += "&passfile=" + esc.Replace(c.Passfile())
	}
	return u
}

func quoteKV(v string) string {
	if v != "" && !strings.ContainsAny(v, " '\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// QuoteGUC quotes a postgresql.conf value.
func QuoteGUC(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }
