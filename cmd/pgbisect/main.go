// Command pgbisect builds PostgreSQL at commits, benchmarks the builds,
// and bisects performance regressions to their culprit commits.
// See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pgbisect/pgbisect/internal/front/cli"
)

// stopSignals end a run the same way: the sample in progress is abandoned
// (its server killed, its cluster removed), what was measured is saved.
// SIGHUP is one of them, so a closed terminal or ssh session leaves no
// server running; pgbisect has no configuration to reload (the daemon
// reads the config at start, see docs/nightly.md).
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
