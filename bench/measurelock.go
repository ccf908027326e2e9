package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gofrs/flock"
)

// DefaultMeasureLock is the machine-wide lock every sample holds: two
// pgbisect processes never measure at the same time, even with different
// state directories (whose machine locks are their own). As root it lives
// in /run/lock; otherwise it is per user, under the temporary directory.
func DefaultMeasureLock() string {
	if os.Geteuid() == 0 {
		if fi, err := os.Stat("/run/lock"); err == nil && fi.IsDir() {
			return "/run/lock/pgbisect-measure.lock"
		}
	}
	return filepath.Join(os.TempDir(), "pgbisect-measure-"+strconv.Itoa(os.Geteuid())+".lock")
}

// measurePoll is how often a sample waiting for another process's retries.
const measurePoll = 50 * time.Millisecond

// lockMeasure takes the measure lock at path, waiting for another
// process's sample to end; "-" takes none. The lock is an flock(2), so it
// dies with a killed process.
func lockMeasure(ctx context.Context, path string) (unlock func(), err error) {
	if path == "-" {
		return func() {}, nil
	}
	if path == "" {
		path = DefaultMeasureLock()
	}
	l := flock.New(path, flock.SetPermissions(0o644))
	ok, err := l.TryLock()
	if err == nil && !ok {
		ok, err = l.TryLockContext(ctx, measurePoll)
	}
	if err != nil || !ok {
		_ = l.Close()
		return nil, fmt.Errorf("waiting for the measure lock %s (another pgbisect is measuring): %w", path, err)
	}
	return func() { _ = l.Unlock() }, nil
}
