package build

import (
	"errors"
	"fmt"
	"strings"
)

// ErrBuildFailed is matched (errors.Is) by every *Error: the commit does not
// build with these options. A bisection skips such a commit; it never blames
// it.
var ErrBuildFailed = errors.New("build failed")

// Error is a failed build: which commit, which phase (configure, make,
// install), the tail of the build log and the path of the whole log.
type Error struct {
	Commit  string // full hash of the commit whose tree was built
	Phase   string // "configure", "make", "install", "meson", "ninja"
	LogPath string // the full log, under the state directory's logs/
	Tail    string // the last lines of the log (about 40)
	Err     error  // the underlying failure (exit status)
}

func (e *Error) Error() string {
	return fmt.Sprintf("build of %s failed in %s: %v (log: %s)", Short(e.Commit), e.Phase, e.Err, e.LogPath)
}

// Is makes errors.Is(err, ErrBuildFailed) true.
func (e *Error) Is(target error) bool { return target == ErrBuildFailed }

func (e *Error) Unwrap() error { return e.Err }

// MissingToolsError says which build tools or headers are missing and which
// Debian packages provide them.
type MissingToolsError struct {
	Tools    []string // "bison", "readline headers", ...
	Packages []string // Debian packages to install
}

func (e *MissingToolsError) Error() string {
	return fmt.Sprintf("cannot build PostgreSQL: missing %s: install them with: apt-get install %s",
		strings.Join(e.Tools, ", "), strings.Join(e.Packages, " "))
}
