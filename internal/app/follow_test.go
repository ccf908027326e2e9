package app

import (
	"bufio"
	"context"
	"fmt"
	"github.com/pgbisect/pgbisect/internal/base/proc"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/internal/base/machinelock"
	"github.com/pgbisect/pgbisect/internal/testkit/gittest"
	"github.com/pgbisect/pgbisect/store"
	"github.com/pgbisect/pgbisect/store/storetest"
)

func TestMain(m *testing.M) {
	// Tests run many state directories at once: a machine lock for each.
	os.Setenv(machinelock.Env, "state")
	if os.Getenv(bisectorRepoEnv) != "" {
		os.Exit(bisectorMain())
	}
	storetest.Main(m)
}

// The second process of TestFollowBisectionFromAnotherProcess is this test
// binary run again with these variables set.
const (
	bisectorDBEnv    = "PGBISECT_TEST_BISECTOR_DB"
	bisectorRepoEnv  = "PGBISECT_TEST_BISECTOR_REPO"
	bisectorStateEnv = "PGBISECT_TEST_BISECTOR_STATE"
	bisectorGoodEnv  = "PGBISECT_TEST_BISECTOR_GOOD"
	bisectorBadEnv   = "PGBISECT_TEST_BISECTOR_BAD"
	bisectorJobEnv   = "PGBISECT_TEST_BISECTOR_JOB"
)

// bisectorMain runs a bisection as the job named in the environment and prints its events'
// lines on stdout, as a terminal shows them.
func bisectorMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, store.Config{URL: os.Getenv(bisectorDBEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	a, err := Open(ctx, Options{StateDir: os.Getenv(bisectorStateEnv), Repo: os.Getenv(bisectorRepoEnv), Branch: "master", RunAs: proc.BenchUser}, st)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, err = a.Bisect(ctx, os.Getenv(bisectorJobEnv), BisectRequest{Scenario: "../../configs/scenarios/copy-single.yaml",
		Good: os.Getenv(bisectorGoodEnv), Bad: os.Getenv(bisectorBadEnv)}, func(e Event) {
		fmt.Printf("%s %s\n", e.Kind, e.Text)
	})
	fmt.Fprintln(os.Stderr, "bisection:", err)
	return 0
}

// TestFollowBisectionFromAnotherProcess follows, from this process, a
// bisection that another OS process runs through the App, from its first
// durable event to its done event, and checks that the follower saw every
// event the bisecting process emitted after it became durable, in order,
// as the bisecting process showed them. The repository is not
// PostgreSQL's, so every build fails at once: the bisection is real (real
// git, real builder, real store) and short.
func TestFollowBisectionFromAnotherProcess(t *testing.T) {
	st := storetest.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	repo, c1, _, c3, _ := gittest.Repo(t)
	state := t.TempDir()
	job := fmt.Sprintf("follow-test-%d", time.Now().UnixNano()) // the store outlives one run of the test

	type seen struct {
		kind, text string
	}
	followed := make(chan []seen, 1)
	go func() {
		var got []seen
		// A follower that may start before the job's first event: it
		// listens, reads what there is, then waits for more.
		err := st.FollowEvents(ctx, job, 0, func(se store.Event) error {
			e, err := Decode(se)
			if err != nil {
				return err
			}
			got = append(got, seen{string(e.Kind), e.Text})
			if e.Kind == KindDone {
				return store.ErrStopFollowing
			}
			return nil
		})
		if err != nil {
			t.Errorf("following: %v", err)
		}
		followed <- got
	}()

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), bisectorDBEnv+"="+st.Cluster().URL(), bisectorRepoEnv+"="+repo, bisectorStateEnv+"="+state,
		bisectorGoodEnv+"="+c1, bisectorBadEnv+"="+c3, bisectorJobEnv+"="+job)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var printed []seen
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		kind, text, _ := strings.Cut(sc.Text(), " ")
		printed = append(printed, seen{kind, text})
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("bisecting process: %v\n%s", err, stderr.String())
	}
	var got []seen
	select {
	case got = <-followed:
	case <-ctx.Done():
		t.Fatalf("the follower did not see the done event; the bisecting process printed %q", printed)
	}
	// Events before the results store was opened (checking the scenario,
	// resolving the revisions) are the terminal's only.
	i := len(printed) - len(got)
	if i < 0 || !slices.Equal(got, printed[i:]) {
		t.Errorf("followed\n%q\nprinted\n%q", got, printed[i:])
	}
	t.Logf("%d events followed, %d printed: %q", len(got), len(printed), got)
	for _, k := range []Kind{KindStart, KindBuildStarted, KindBuildFailed, KindDone} {
		if !slices.ContainsFunc(got, func(s seen) bool { return s.kind == string(k) }) {
			t.Errorf("no %s event in %q", k, got)
		}
	}
}
