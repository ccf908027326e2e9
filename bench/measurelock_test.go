package bench

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestMeasureLock: while one holder has the machine-wide measure lock
// (another process, or another Runner: flock locks of two open files
// conflict), a second sample cannot start; once it is released, it can.
func TestMeasureLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "measure.lock")
	unlock, err := lockMeasure(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	gaveUp, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := lockMeasure(gaveUp, path); err == nil || !strings.Contains(err.Error(), "another pgbisect is measuring") {
		t.Fatalf("second holder: %v, want it refused while the lock is held", err)
	}
	unlock()
	unlock2, err := lockMeasure(gaveUp, path)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	unlock2()
	if u, err := lockMeasure(gaveUp, "-"); err != nil {
		t.Errorf(`"-" takes no lock: %v`, err)
	} else {
		u()
	}
}
