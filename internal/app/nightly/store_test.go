package nightly

import (
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

var testNow = time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC)

// testStore returns the results store the package's tests share. Tests
// keep apart by using their own branch names.
func testStore(t *testing.T) *store.Store { return storetest.Store(t) }
