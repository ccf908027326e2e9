package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/pgbisect/pgbisect/internal/base/machinelock"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestMain points the commands that use the results store (bisect, demo,
// post, report) at one cluster the package's tests share, stopped at the
// end. Tests of the private-cluster path itself set PGBISECT_DB to "".
func TestMain(m *testing.M) {
	// The test binary as pgbisect itself, in another process
	// (TestDaemonsKillNineRealBisection): os.Args[1:] are its arguments.
	if os.Getenv(cliChildEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	// Tests run many state directories at once: a machine lock for each.
	os.Setenv(machinelock.Env, "state")
	if st, err := storetest.Start(); err == nil {
		os.Setenv("PGBISECT_DB", st.Cluster().URL())
	}
	storetest.Main(m)
}

// cliChildEnv makes the test binary run as pgbisect (see TestMain).
const cliChildEnv = "PGBISECT_CLI_CHILD"
