package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMissingTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // nothing on PATH
	err := checkTools(context.Background(), Options{})
	var mt *MissingToolsError
	if !errors.As(err, &mt) {
		t.Fatalf("checkTools with an empty PATH = %v", err)
	}
	wantPkgs := []string{"gcc", "make", "bison", "flex", "perl"}
	if !reflect.DeepEqual(mt.Packages, wantPkgs) {
		t.Errorf("packages = %v, want %v", mt.Packages, wantPkgs)
	}
	if !strings.Contains(err.Error(), "apt-get install gcc make bison flex perl") {
		t.Errorf("message %q does not say what to install", err)
	}
	err = checkTools(context.Background(), Options{Meson: true})
	if !errors.As(err, &mt) || !strings.Contains(err.Error(), "ninja-build") {
		t.Errorf("meson build: %v", err)
	}
}

// fakeInstall puts a finished install into the cache of b.
func fakeInstall(t *testing.T, b *Builder, id string, age time.Duration, size int64) {
	t.Helper()
	root := b.prefix(id)
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	inst := &Install{Key: id, Commit: id, Subject: "s " + id, Prefix: root, BuiltAt: time.Now().Add(-age), Size: size}
	if err := writeInstall(root, inst); err != nil {
		t.Fatal(err)
	}
}

func TestListAndPrune(t *testing.T) {
	h := newHistory(t)
	b := NewBuilder(h.open(), t.TempDir(), Options{}, nil, nil)
	if l, err := b.List(); err != nil || len(l) != 0 {
		t.Fatalf("List of an empty cache = %v, %v", l, err)
	}
	fakeInstall(t, b, "old", 48*time.Hour, 100)
	fakeInstall(t, b, "mid", 2*time.Hour, 100)
	fakeInstall(t, b, "new", time.Minute, 100)
	// A half-made entry (no description) is not an install.
	os.MkdirAll(filepath.Join(b.buildsDir(), "partial", "bin"), 0o755)
	l, err := b.List()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, i := range l {
		keys = append(keys, i.Key)
	}
	if !reflect.DeepEqual(keys, []string{"new", "mid", "old"}) {
		t.Errorf("List = %v, want newest first", keys)
	}
	removed, err := b.Prune(24*time.Hour, 0)
	if err != nil || len(removed) != 1 || removed[0].Key != "old" {
		t.Errorf("Prune(24h) = %v, %v", removed, err)
	}
	removed, err = b.Prune(0, 150)
	if err != nil || len(removed) != 1 || removed[0].Key != "mid" {
		t.Errorf("Prune(150 bytes) = %v, %v", removed, err)
	}
	if _, err := os.Stat(b.prefix("new")); err != nil {
		t.Errorf("newest install removed: %v", err)
	}
}

func TestRecordedFailure(t *testing.T) {
	h := newHistory(t)
	b := NewBuilder(h.open(), t.TempDir(), Options{}, nil, nil)
	key, err := b.Key(context.Background(), h.c2)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(b.failedDir(), 0o755)
	b.recordFailure(key.ID, &Error{Commit: h.c2, Phase: "make", LogPath: "/x.log", Tail: "error: boom\n", Err: errors.New("exit status 2")})
	var recorded []string
	b.Record = func(_ context.Context, k Key, inst *Install, failure *Error) {
		recorded = append(recorded, fmt.Sprintf("%s %v %v", k.ID, inst != nil, failure != nil && failure.LogPath == "/x.log"))
	}
	_, err = b.Build(context.Background(), h.c2)
	var be *Error
	if !errors.As(err, &be) || !errors.Is(err, ErrBuildFailed) || be.Tail != "error: boom\n" || be.LogPath != "/x.log" {
		t.Errorf("Build of a recorded failure = %v", err)
	}
	if want := []string{key.ID + " false true"}; !slices.Equal(recorded, want) {
		t.Errorf("Record saw %q, want %q", recorded, want)
	}
}

func TestMakeReadable(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "bin"), 0o700)
	os.WriteFile(filepath.Join(root, "bin", "postgres"), []byte("12345"), 0o700)
	os.WriteFile(filepath.Join(root, "data"), []byte("1"), 0o600)
	size, err := makeReadable(root)
	if err != nil || size != 6 {
		t.Fatalf("makeReadable = %d, %v", size, err)
	}
	for p, want := range map[string]os.FileMode{"bin": 0o755, "bin/postgres": 0o555, "data": 0o444} {
		fi, _ := os.Stat(filepath.Join(root, p))
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %o, want %o", p, fi.Mode().Perm(), want)
		}
	}
}
