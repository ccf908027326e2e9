package build

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// Which paths pgbisect writes. A patch comes from anyone (a comment's
// attachment, a mailing list), and so does the tree of a pull request's
// commit, and root writes them into the worktree's source. So the paths
// are checked here, by pgbisect itself and before anything is written
// (not left to the tree walker of whichever go-git is vendored), and the
// checkout writes through os.Root besides (worktree.go): a path missed
// here still cannot leave the source directory.

// RefusedError is a patch, or a commit's tree, that holds a path pgbisect
// will not write: absolute, with an empty, "." or ".." element, a .git
// element, a control character, a file under a symbolic link or under
// another file, or a symbolic link that points out of its directory.
// Nothing is written for it.
type RefusedError struct {
	// Patch is the Patch.Name that holds the path; "" for a commit's tree.
	Patch string
	// Commit is the commit whose tree holds the path, when Patch is "".
	Commit string
	Path   string
	Reason string // "has a \"..\" element"
}

func (e *RefusedError) Error() string {
	what := "patch " + e.Patch
	if e.Patch == "" {
		what = "commit " + Short(e.Commit)
	}
	return fmt.Sprintf("%s refused: the path %q %s: pgbisect writes only relative paths inside the source tree", what, clip(e.Path), e.Reason)
}

// pathProblem says why pgbisect refuses to write p, a slash-separated path
// of a tree or a patch, or returns "" when it may.
func pathProblem(p string) string {
	if p == "" {
		return "is empty"
	}
	if p[0] == '/' {
		return "is absolute"
	}
	if hasControl(p) {
		return "holds a control character"
	}
	for _, el := range strings.Split(p, "/") {
		switch {
		case el == "":
			return "has an empty element (a doubled or trailing slash)"
		case el == "." || el == "..":
			return fmt.Sprintf("has a %q element", el)
		case isDotGit(el):
			return fmt.Sprintf("has a .git element (%q)", clip(el))
		}
	}
	return ""
}

// linkProblem says why pgbisect refuses a symbolic link to target, or
// returns "" when it may write it. A link may point only at or below its
// own directory: checked one by one, links that each climb with ".." but
// stay inside the tree can still leave it together (a link to "." in a
// subdirectory, then another through it and up), while links that never
// climb cannot.
func linkProblem(target string) string {
	switch {
	case target == "":
		return "is a symbolic link to nothing"
	case target[0] == '/':
		return fmt.Sprintf("is a symbolic link to the absolute path %q", clip(target))
	case hasControl(target):
		return "is a symbolic link whose target holds a control character"
	case len(target) > maxLinkTarget:
		return fmt.Sprintf("is a symbolic link whose target is longer than %d bytes", maxLinkTarget)
	}
	for _, el := range strings.Split(target, "/") {
		switch {
		case el == "..":
			return fmt.Sprintf("is a symbolic link to %q, out of its directory (a link may point only at or below it)", clip(target))
		case isDotGit(el):
			return fmt.Sprintf("is a symbolic link into a .git directory (%q)", clip(target))
		}
	}
	return ""
}

// maxLinkTarget is the longest symbolic link target pgbisect writes:
// Linux's PATH_MAX.
const maxLinkTarget = 4096

// hasControl reports whether s holds a NUL or another control character.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// isDotGit reports whether a path element names a .git directory as git
// itself refuses it (verify_path): in any case, with the trailing dots
// and spaces Windows drops, with the code points HFS+ ignores, and as
// NTFS's short name git~1.
func isDotGit(el string) bool {
	e := strings.Map(func(r rune) rune {
		if hfsIgnored(r) {
			return -1
		}
		return r
	}, el)
	e = strings.TrimRight(e, ". ")
	return strings.EqualFold(e, ".git") || strings.EqualFold(e, "git~1")
}

// hfsIgnored are the code points HFS+ leaves out of a name when it
// compares names (git's is_hfs_dotgit).
func hfsIgnored(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}

// treeEntry is what checkTree needs of one file of a tree.
type treeEntry struct {
	symlink bool
	target  func() (string, error) // a symbolic link's target
	source  string                 // the patch that wrote it; "" for the tree's own
}

// checkTree refuses a set of files (path → entry) that pgbisect must not
// write: a path pathProblem refuses, a symbolic link linkProblem refuses,
// or a file whose path goes through another file of the set (a symbolic
// link to write through, or a file and a directory of one name, which
// git's own trees never hold). refused builds the error.
func checkTree(files map[string]treeEntry, refused func(e treeEntry, path, reason string) error) error {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths) // the same error every time
	for _, p := range paths {
		e := files[p]
		if why := pathProblem(p); why != "" {
			return refused(e, p, why)
		}
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if d, ok := files[dir]; ok {
				if d.symlink {
					return refused(e, p, fmt.Sprintf("goes through %q, a symbolic link", clip(dir)))
				}
				return refused(e, p, fmt.Sprintf("goes through %q, a file", clip(dir)))
			}
		}
		if e.symlink {
			target, err := e.target()
			if err != nil {
				return err
			}
			if why := linkProblem(target); why != "" {
				return refused(e, p, why)
			}
		}
	}
	return nil
}
