package build

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
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

// TimeoutError is a build stopped because it ran longer than the builder's
// Timeout (the config's build.timeout). It is not a build failure: the
// commit may build on a faster or idler machine, so it is not recorded as
// broken, and a bisection stops on it rather than skip the commit.
type TimeoutError struct {
	Commit  string        // full hash of the commit whose tree was built
	Timeout time.Duration // the limit it ran into
	LogPath string        // the log of the stopped build
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("build of %s did not finish within %s and was stopped (log: %s); raise build.timeout in the config if this machine is that slow",
		Short(e.Commit), e.Timeout, e.LogPath)
}

// Is makes errors.Is(err, context.DeadlineExceeded) true, as it was for
// callers that set their own deadline.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

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
