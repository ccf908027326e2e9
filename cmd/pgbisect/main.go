// Command pgbisect builds PostgreSQL at commits, benchmarks the builds,
// and bisects performance regressions to their culprit commits.
// See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pgbisect/pgbisect/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
