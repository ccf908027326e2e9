package cli

import (
	"os"
	"testing"

	"github.com/pgbisect/pgbisect/internal/machinelock"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestMain points the commands that use the results store (bisect, demo,
// post, report) at one cluster the package's tests share, stopped at the
// end. Tests of the private-cluster path itself set PGBISECT_DB to "".
func TestMain(m *testing.M) {
	// Tests run many state directories at once: a machine lock for each.
	os.Setenv(machinelock.Env, "state")
	if st, err := storetest.Start(); err == nil {
		os.Setenv("PGBISECT_DB", st.Cluster().URL())
	}
	storetest.Main(m)
}
