package build

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pgbisect/pgbisect/internal/base/proc"
)

// Who owns what when pgbisect runs as root and builds as BuildAs (see
// docs/build.md, "Who builds"):
//
//	worktrees/<hash>/src        root, read-only to the build user (git checkout)
//	worktrees/<hash>/build      the build user (configure, make: a VPATH build)
//	worktrees/<hash>/meson-build the build user
//	builds/.tmp/<key>/stage     the build user (make install DESTDIR=...)
//	builds/<key>                root: a copy of the staged install made by root
//	ccache/                     the build user
//
// Root never follows a path through a directory the build user can write
// without os.Root, so a symbolic link planted by a build cannot send one of
// root's chowns, chmods or reads elsewhere.

// buildUID returns the uid builds run as: u's when pgbisect is root and u
// is set, pgbisect's own otherwise.
func buildUID(u *proc.User) int {
	if u != nil && proc.IsRoot() {
		return int(u.UID)
	}
	return os.Geteuid()
}

// dropping reports whether builds run as another user than pgbisect.
func dropping(u *proc.User) bool { return buildUID(u) != os.Geteuid() }

// ownerOf returns the uid that owns path (not following a last symlink).
func ownerOf(path string) (int, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no owner information", path)
	}
	return int(st.Uid), nil
}

// ownedDir makes dir exist as a directory owned by the build user. A dir
// owned by someone else (an earlier pgbisect that built as root, or
// another run_as) is removed first. It reports whether it removed
// anything.
func ownedDir(dir string, u *proc.User) (removed bool, err error) {
	uid := buildUID(u)
	owner, err := ownerOf(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false, err
	case owner == uid:
		return false, nil
	default:
		// os.RemoveAll opens each directory without following
		// symbolic links, so it removes only what is under dir.
		if err := os.RemoveAll(dir); err != nil {
			return false, fmt.Errorf("removing %s (owned by uid %d, builds run as uid %d): %w", dir, owner, uid, err)
		}
		removed = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return removed, err
	}
	return removed, proc.Chown(dir, u)
}

// chownTree gives dir and everything under it to u (when pgbisect is root
// and u is set). Paths are resolved inside dir through os.Root and
// symbolic links are changed themselves (Lchown), so a link planted by a
// build cannot make root chown anything outside dir. Children go before
// their directory, so a directory becomes the user's only when nothing
// under it is left to change; an interrupted run is finished by the next.
// A file with more than one hard link is left alone: where hard links to
// other users' files are allowed (fs.protected_hardlinks=0), the build
// user could otherwise link /etc/shadow into its ccache and have root give
// it away.
func chownTree(dir string, u *proc.User) error {
	if u == nil || !proc.IsRoot() {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	uid, gid := int(u.UID), int(u.GID)
	var dirs []string
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) == uid || st.Nlink > 1) {
			return nil
		}
		return root.Lchown(p, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("giving %s to %s: %w", dir, u.Name, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := root.Lchown(dirs[i], uid, gid); err != nil {
			return fmt.Errorf("giving %s to %s: %w", dir, u.Name, err)
		}
	}
	return nil
}

// copyInstall copies the install the build user staged in src into dst, a
// new directory that pgbisect (root) owns: the build user cannot change
// it afterwards, not even through a file it still holds open. Everything
// in src is read through os.Root, so links cannot make root read outside
// src. Directories get mode 0755, files 0644 or 0755 (executable), never
// setuid or setgid; symbolic links are copied as links; anything else
// (devices, fifos, sockets) is an error, and so is a file that is not the
// build user's (uid): root copies nothing the build user could not read
// itself, such as a hard link to a root-only file. A file that is still
// the very file of the cached install parent ("" for none) at the same
// path, a link the incremental install left in place, is linked from
// parent instead. It returns the install's size in bytes.
func copyInstall(src, dst string, uid int, parent string) (int64, error) {
	root, err := os.OpenRoot(src)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	var size int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		to := filepath.Join(dst, filepath.FromSlash(p))
		switch {
		case d.IsDir():
			if err := os.Mkdir(to, 0o755); err != nil {
				return err
			}
			return os.Chmod(to, 0o755) // whatever the umask
		case d.Type()&fs.ModeSymlink != 0:
			target, err := root.Readlink(p)
			if err != nil {
				return err
			}
			// A link must stay inside the install: one to a file the
			// build user controls would let it change the cached install
			// afterwards. PostgreSQL's own links are relative.
			if filepath.IsAbs(target) || !filepath.IsLocal(filepath.Join(filepath.Dir(filepath.FromSlash(p)), target)) {
				return fmt.Errorf("%s: a link to %s leaves the install; a build may link only within it", p, target)
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular() && sameFile(root, p, parent):
			from := filepath.Join(parent, filepath.FromSlash(p))
			fi, err := os.Lstat(from)
			if err != nil {
				return err
			}
			size += fi.Size()
			return os.Link(from, to)
		case d.Type().IsRegular():
			n, err := copyFileFrom(root, p, to, uid)
			size += n
			return err
		default:
			return fmt.Errorf("%s: unexpected file type %s in an install", p, d.Type())
		}
	})
	if err != nil {
		return size, fmt.Errorf("copying the install %s: %w", src, err)
	}
	return size, nil
}

// copyFileFrom copies the regular file p of root, owned by uid, to the new
// file to, with mode 0644 or, when any execute bit is set, 0755.
func copyFileFrom(root *os.Root, p, to string, uid int) (int64, error) {
	// O_NONBLOCK: a fifo swapped in after the walk must not block root.
	in, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", p)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
		return 0, fmt.Errorf("%s: not a file of the build user's (uid %d)", p, uid)
	}
	mode := os.FileMode(0o644)
	if fi.Mode().Perm()&0o111 != 0 {
		mode = 0o755
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Chmod(mode) // whatever the umask
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}
