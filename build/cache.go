package build

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gofrs/flock"
)

// installFile is the description of an install, kept inside it.
const installFile = "pgbisect-install.json"

func writeInstall(root string, inst *Install) error {
	data, err := json.MarshalIndent(inst, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, installFile), data, 0o644)
}

func readInstallAt(prefix string) (*Install, error) {
	data, err := os.ReadFile(filepath.Join(prefix, installFile))
	if err != nil {
		return nil, err
	}
	var inst Install
	if err := json.Unmarshal(data, &inst); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(prefix, installFile), err)
	}
	// The state directory may have moved since.
	inst.Prefix = prefix
	return &inst, nil
}

func (b *Builder) readInstall(id string) (*Install, bool) {
	inst, err := readInstallAt(b.prefix(id))
	if err != nil {
		return nil, false
	}
	return inst, true
}

// failure is a recorded build failure.
type failure struct {
	Commit, Phase, LogPath, Tail, Err string
	At                                time.Time
}

func (b *Builder) recordFailure(id string, e *Error) {
	data, _ := json.MarshalIndent(failure{Commit: e.Commit, Phase: e.Phase, LogPath: e.LogPath, Tail: e.Tail, Err: e.Err.Error(), At: time.Now().UTC()}, "", "  ")
	_ = writeFileAtomic(filepath.Join(b.failedDir(), id+".json"), data, 0o644)
}

func (b *Builder) readFailure(id string) (*Error, bool) {
	data, err := os.ReadFile(filepath.Join(b.failedDir(), id+".json"))
	if err != nil {
		return nil, false
	}
	var f failure
	if json.Unmarshal(data, &f) != nil {
		return nil, false
	}
	return &Error{Commit: f.Commit, Phase: f.Phase, LogPath: f.LogPath, Tail: f.Tail,
		Err: fmt.Errorf("%s (recorded %s; build again with retry to try anew)", f.Err, f.At.Format(time.RFC3339))}, true
}

// Lookup returns the cached install of a commit, if there is one. It never
// builds; its git reads end with ctx.
func (b *Builder) Lookup(ctx context.Context, hash string) (*Install, bool, error) {
	key, err := b.Key(ctx, hash)
	if err != nil {
		return nil, false, err
	}
	inst, ok := b.readInstall(key.ID)
	return inst, ok, nil
}

// List returns every cached install in the state directory (of any
// options), newest first.
func (b *Builder) List() ([]Install, error) {
	entries, err := os.ReadDir(b.buildsDir())
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing builds: %w", err)
	}
	var out []Install
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		inst, err := readInstallAt(filepath.Join(b.buildsDir(), e.Name()))
		if err != nil {
			continue // not a finished install
		}
		out = append(out, *inst)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BuiltAt.After(out[j].BuiltAt) })
	return out, nil
}

// Prune removes installs built longer than maxAge ago (0: no age limit),
// then the oldest ones until the cache holds at most maxBytes (0: no size
// limit), and returns what it removed. An install being built or locked by
// another process is left alone.
func (b *Builder) Prune(maxAge time.Duration, maxBytes int64) ([]Install, error) {
	all, err := b.List()
	if err != nil {
		return nil, err
	}
	var total int64
	for _, inst := range all {
		total += inst.Size
	}
	var removed []Install
	now := time.Now()
	// Oldest first.
	for i := len(all) - 1; i >= 0; i-- {
		inst := all[i]
		tooOld := maxAge > 0 && now.Sub(inst.BuiltAt) > maxAge
		tooBig := maxBytes > 0 && total > maxBytes
		if !tooOld && !tooBig {
			continue
		}
		if err := os.MkdirAll(b.locksDir(), 0o755); err != nil {
			return removed, err
		}
		l := flock.New(filepath.Join(b.locksDir(), inst.Key+".lock"))
		ok, err := l.TryLock()
		if err != nil || !ok {
			continue
		}
		// Rename first so a reader never sees a half-deleted install.
		trash := filepath.Join(b.tmpDir(), inst.Key+".prune")
		os.MkdirAll(b.tmpDir(), 0o755)
		err = os.Rename(inst.Prefix, trash)
		if err == nil {
			err = os.RemoveAll(trash)
		}
		_ = l.Unlock()
		if err != nil {
			return removed, fmt.Errorf("removing build %s: %w", inst.Key, err)
		}
		total -= inst.Size
		removed = append(removed, inst)
	}
	return removed, nil
}
