package bench

import (
	"context"
	"fmt"

	"github.com/pgbisect/pgbisect/internal/base/machinelock"
)

// lockMeasure takes the machine lock (package machinelock) for one sample:
// at path, or machinelock.Path(stateDir) when path is "", the lock a job of
// this state directory holds; "-" takes none. Inside a job its process
// holds the lock already and the sample shares the hold; outside one the
// sample waits for any other process's job or sample to end.
func lockMeasure(ctx context.Context, path, stateDir string) (unlock func(), err error) {
	if path == "-" {
		return func() {}, nil
	}
	if path == "" {
		path = machinelock.Path(stateDir)
	}
	unlock, err = machinelock.Lock(ctx, path, true)
	if err != nil {
		return nil, fmt.Errorf("waiting for the machine lock %s (another pgbisect is measuring): %w", path, err)
	}
	return unlock, nil
}
