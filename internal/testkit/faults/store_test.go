package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/internal/base/pgcluster"
	"github.com/pgbisect/pgbisect/internal/base/proc"
	"github.com/pgbisect/pgbisect/internal/testkit/citest"
	"github.com/pgbisect/pgbisect/store"
)

func pgBin(t *testing.T) string {
	t.Helper()
	dir, err := store.FindBinDir("")
	if err != nil {
		citest.Unavailable(t, "%v: run scripts/setup-debian.sh", err)
	}
	return dir
}

// storeUser is the OS user of the results store when the test is root.
func storeUser(t *testing.T) *proc.User {
	t.Helper()
	if !proc.IsRoot() {
		return nil
	}
	u, err := proc.LookupUser("pgbisect")
	if err != nil {
		citest.Unavailable(t, "%v (scripts/setup-debian.sh creates it)", err)
	}
	return u
}

// openDir is a directory the store's user can traverse.
func openDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{d, filepath.Dir(d)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// storeSaver saves bisections in the results store as pgbisect does, and
// runs hook before the save numbered at.
type storeSaver struct {
	st   *store.Store
	n    int
	at   int
	hook func()
}

func (s *storeSaver) SaveBisection(ctx context.Context, b *bisect.State) error {
	s.n++
	if s.n == s.at && s.hook != nil {
		s.hook()
	}
	return s.st.SaveBisection(ctx, b)
}

func loadFromStore(t *testing.T, st *store.Store, id string) *bisect.State {
	t.Helper()
	s, err := st.LoadBisection(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStoreStopsMidBisection stops the results server (an external one,
// given by URL, which pgbisect does not restart) in the middle of a
// bisection: the bisection stops with an error that says the state could
// not be saved, and once the server is back it resumes from the store and
// ends like an uninterrupted one.
func TestStoreStopsMidBisection(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t)
	st, err := store.Open(ctx, store.Config{URL: c.URL("postgres")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	h := history(*seed, 12)
	want, err := reference(h, *seed, "elapsed")
	if err != nil {
		t.Fatal(err)
	}
	s, err := bisect.NewState(inputs(h, "elapsed"), h.Commits, fixedNow())
	if err != nil {
		t.Fatal(err)
	}
	lb := newLab(h, *seed, s, nil, 0)
	sv := &storeSaver{st: st, at: 30, hook: func() {
		if err := c.Stop(ctx, time.Minute); err != nil {
			t.Error(err)
		}
	}}
	err = (&bisect.Engine{Builder: lb, Measurer: lb, Saver: sv, Now: fixedNow}).Run(ctx, s)
	if err == nil {
		t.Fatal("the bisection went on with its store stopped")
	}
	if !strings.Contains(err.Error(), "saving bisection "+s.ID) {
		t.Errorf("error %q does not say the bisection could not be saved", err)
	}
	t.Logf("with the store stopped: %v", err)

	if err := c.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	got := loadFromStore(t, st, s.ID)
	lb = newLab(h, *seed, got, nil, 0)
	sv.hook = nil
	if err := (&bisect.Engine{Builder: lb, Measurer: lb, Saver: sv, Now: fixedNow}).Run(ctx, got); err != nil {
		t.Fatalf("resumed: %v", err)
	}
	sameBisection(t, loadFromStore(t, st, s.ID), want)
}

// TestFullFilesystem puts the state directory (the private results
// cluster and the bisection files) on a small tmpfs and fills it: saving
// fails with an error that says the disk is full, what was saved before
// is intact in both, and saving works again once there is room.
func TestFullFilesystem(t *testing.T) {
	bin := pgBin(t)
	citest.Root(t, "mounting a tmpfs")
	ctx := context.Background()
	dir := openDir(t)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=96m,mode=0755", "pgbisect-faults", dir).CombinedOutput(); err != nil {
		citest.Unavailable(t, "cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	t.Setenv("PGBISECT_PG_BINDIR", bin)
	st, err := store.Open(ctx, store.Config{StateDir: dir, RunAs: "pgbisect", StopOnClose: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	h := history(*seed, 12)
	small, err := reference(h, *seed, "elapsed")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveBisection(ctx, small); err != nil {
		t.Fatal(err)
	}

	// Fill the filesystem.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()

	// A bigger state: what a long bisection's events and samples add.
	// Random text, so that TOAST cannot compress it away.
	big := *small
	big.Events = slices.Clone(small.Events)
	rng := rand.New(rand.NewPCG(*seed, 3))
	for i := range 4000 {
		b := make([]byte, 200)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		big.Events = append(big.Events, bisect.Event{Kind: "note", Message: fmt.Sprintf("%04d %x", i, b)})
	}
	errStore := st.SaveBisection(ctx, &big)
	t.Logf("on a full filesystem: store: %v", errStore)
	if errStore == nil {
		t.Errorf("store: saving on a full filesystem succeeded")
	} else if !strings.Contains(strings.ToLower(errStore.Error()), "no space left on device") {
		t.Errorf("store: %v: the error does not say the disk is full", errStore)
	}
	if got := loadFromStore(t, st, small.ID); !got.Done() || len(got.Events) != len(small.Events) {
		t.Errorf("the store lost the state saved before the disk filled")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveBisection(ctx, &big); err != nil {
		t.Errorf("store, with room again: %v", err)
	}
	if got := loadFromStore(t, st, big.ID); len(got.Events) != len(big.Events) {
		t.Errorf("the store holds %d events, want %d", len(got.Events), len(big.Events))
	}
}

// startCluster starts a results cluster for one test, stopped when it ends.
func startCluster(t *testing.T) *pgcluster.Cluster {
	t.Helper()
	bin := pgBin(t)
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c := &pgcluster.Cluster{Dir: filepath.Join(openDir(t), "db"), Port: port, BinDir: bin, User: storeUser(t), Superuser: "pgbisect"}
	if err := c.MakeDirs(); err != nil {
		t.Fatal(err)
	}
	if err := c.Init(ctx, pgcluster.InitOptions{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background(), time.Minute) })
	return c
}

// resultsDB is the URL of a fresh results store for one test's processes.
func resultsDB(t *testing.T) string {
	t.Helper()
	return startCluster(t).URL("postgres")
}
