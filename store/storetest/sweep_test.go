package storetest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gofrs/flock"
)

// TestSweep: a store directory whose owner lock is free, or an old one
// without a lock, is removed; one whose owner still holds its lock, or a
// new one without a lock (a process just starting), is kept.
func TestSweep(t *testing.T) {
	NeedServer(t) // sweep stops servers with the server's pg_ctl
	mk := func(locked, lockFile bool, age time.Duration) string {
		dir, err := os.MkdirTemp("", prefix)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if lockFile {
			l := flock.New(filepath.Join(dir, ownerLock))
			if err := l.Lock(); err != nil {
				t.Fatal(err)
			}
			if locked {
				t.Cleanup(func() { _ = l.Unlock() })
			} else if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dead := mk(false, true, 0)
	oldNoLock := mk(false, false, 2*time.Minute)
	live := mk(true, true, time.Hour)
	starting := mk(false, false, 0)
	sweep()
	for dir, want := range map[string]bool{dead: false, oldNoLock: false, live: true, starting: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: kept %v, want %v", filepath.Base(dir), err == nil, want)
		}
	}
}
