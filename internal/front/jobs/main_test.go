package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/proc/proctest"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/app/nightly"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestMain lets the test binary act as a pgbisect daemon in another process
// (PGBISECT_JOBS_CHILD=1): the tests kill, pause and stop real processes.
func TestMain(m *testing.M) {
	if os.Getenv("PGBISECT_JOBS_CHILD") == "1" {
		os.Exit(child())
	}
	storetest.Main(m)
}

// child runs a daemon with simulated operations on the database of
// PGBISECT_TEST_DB, as machine PGBISECT_MACHINE of class PGBISECT_CLASS,
// until SIGTERM.
func child() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	st, err := store.Open(ctx, store.Config{URL: os.Getenv("PGBISECT_TEST_DB")})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer st.Close()
	ttl, _ := time.ParseDuration(os.Getenv("PGBISECT_LEASE_TTL"))
	cfg := Config{
		Store:    st,
		Ops:      &simOps{st: st, step: 200 * time.Millisecond, github: os.Getenv("PGBISECT_FAKE_GITHUB"), log: log},
		Machine:  os.Getenv("PGBISECT_MACHINE"),
		Class:    os.Getenv("PGBISECT_CLASS"),
		LeaseTTL: ttl,
		Log:      log,
	}
	if spec := os.Getenv("PGBISECT_NIGHTLY"); spec != "" {
		sched, err := nightly.ParseSchedule(spec, "UTC")
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		cfg.Nightly = sched
		cfg.NightlyClasses = strings.Fields(os.Getenv("PGBISECT_NIGHTLY_CLASSES"))
	}
	d, err := New(cfg)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	if err := d.Run(ctx); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

// simOps simulate the operations with the store writes that matter here:
// a "bisection" takes MaxSamples samples, one per step, each written (under
// the job's lease) as the real engine writes them, and resumes from the
// samples stored; its culprit is where the values step up. Nightly records
// an event per pass; Deliver posts to a fake GitHub after a step.
type simOps struct {
	st     *store.Store
	step   time.Duration
	github string
	log    *slog.Logger
}

// simJump is the sample index where the simulated values step up: the
// simulated bisection's culprit.
const simJump = 7

func simValue(i int) float64 {
	if i >= simJump {
		return 120
	}
	return 100
}

// RunJob implements Ops.
func (o *simOps) RunJob(ctx context.Context, _ app.Job, r app.Request, _ app.Sink) error {
	switch r := r.(type) {
	case app.BisectRequest:
		return o.bisect(ctx, r)
	case app.NightlyRequest:
		return o.nightly(ctx)
	case app.DeliverRequest:
		return o.deliver(ctx)
	}
	return nil
}

func (o *simOps) bisect(ctx context.Context, req app.BisectRequest) error {
	id := req.Resume
	for {
		have, err := o.st.Samples(ctx, store.SampleQuery{BuildKey: "sim", Commit: id, Scenario: "sim", Metric: "m"})
		if err != nil {
			return err
		}
		k := len(have)
		if k >= req.MaxSamples {
			culprit := -1
			for i, s := range have {
				if i > 0 && s.Value > have[i-1].Value {
					culprit = s.Index
				}
			}
			return o.st.SaveBisection(ctx, &bisect.State{Version: bisect.StateVersion, ID: id, Phase: bisect.PhaseDone,
				Summary: fmt.Sprintf("culprit c%d after %d samples", culprit, k)})
		}
		select {
		case <-time.After(o.step):
		case <-ctx.Done():
		}
		// The sample in flight is written even when the job is being
		// stopped, as a finished run's would be: the fence decides.
		err = o.st.AddSamples(context.WithoutCancel(ctx), []store.Sample{{BuildKey: "sim", Commit: id, Scenario: "sim", Metric: "m",
			Value: simValue(k), Index: k}})
		if errors.Is(err, store.ErrLeaseLost) {
			o.log.Warn("write refused", slog.Int("sample", k), slog.Any("err", err))
			return err
		}
		if err != nil {
			return err
		}
		o.log.Info("sample written", slog.String("bisection", id), slog.Int("sample", k))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func (o *simOps) nightly(ctx context.Context) error {
	l, _ := store.LeaseOf(ctx)
	_, err := o.st.AppendEvent(ctx, "sim-nightly", "pass", json.RawMessage(strconv.Quote(l.JobID)))
	return err
}

func (o *simOps) deliver(ctx context.Context) error {
	select {
	case <-time.After(5 * o.step):
	case <-ctx.Done():
		return ctx.Err()
	}
	resp, err := http.Post(o.github+"/repos/o/r/issues", "application/json", strings.NewReader(`{"title": "finding"}`))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("fake GitHub: %s", resp.Status)
	}
	return nil
}

// startChild starts a daemon as machine name of class, with env added.
func startChild(t *testing.T, st *store.Store, name, class string, env ...string) *proctest.Proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PGBISECT_JOBS_CHILD=1", "PGBISECT_TEST_DB="+st.Cluster().URL(),
		"PGBISECT_MACHINE="+name, "PGBISECT_CLASS="+class, "PGBISECT_LEASE_TTL=3s")
	cmd.Env = append(cmd.Env, env...)
	return proctest.Start(t, name, cmd)
}
