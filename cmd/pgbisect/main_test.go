package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
)

// TestSIGHUPStopsLikeSIGTERM: each stop signal cancels the context every
// command runs under, as SIGTERM does (whose handling by the daemon and
// the bisection is tested in internal/app/nightly and internal/front/cli). A child
// process waits on that context; the test sends it the signal.
func TestSIGHUPStopsLikeSIGTERM(t *testing.T) {
	if os.Getenv("PGBISECT_SIGNAL_CHILD") != "" {
		ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
		defer stop()
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Println("stopped")
		return
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSIGHUPStopsLikeSIGTERM$")
		cmd.Env = append(os.Environ(), "PGBISECT_SIGNAL_CHILD=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		if !lines.Scan() || lines.Text() != "ready" {
			t.Fatalf("%v: the child did not start: %q", sig, lines.Text())
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		stopped := lines.Scan() && lines.Text() == "stopped"
		err = cmd.Wait()
		if !stopped || err != nil {
			t.Errorf("%v: the context was not cancelled (child: %v)", sig, err)
		}
	}
}
