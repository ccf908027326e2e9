package app

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/build"
)

// DefaultProfileGuided says whether a bisection is profile-guided unless
// the request says otherwise. The experiment that decided it is in
// docs/bisect.md, "Profile-guided search".
const DefaultProfileGuided = true

// DefaultGuideRuns is the profiled runs each endpoint gets to guide the
// search (bisect.DefaultGuideRuns, which its time bound counts).
const DefaultGuideRuns = bisect.DefaultGuideRuns

// GuideTop is how many of the functions whose self share grew most the
// search follows; guideMinChange is the growth below which a function is
// taken for run-to-run noise (1 point of all CPU samples).
const (
	GuideTop       = 3
	guideMinChange = 0.01
	// guideMaxFiles: a name defined at the start of a line in more files
	// of the range's changes than this (main, _PG_init) says nothing.
	guideMaxFiles = 3
)

// bisectGuide fills bisect.State.Hints in a real bisection: it profiles
// the bad commit against the good one once they are shown to differ,
// finds where the functions whose self share grew most are defined, and
// hints the commits of the range that touch those files.
type bisectGuide struct {
	job  bisectProfileJob // the bisection's runner and builder; Runs a side
	repo *build.Repo
}

// guide is the bisection engine's bisect.GuideFunc.
func (g bisectGuide) guide(ctx context.Context, s *bisect.State) (bisect.Guide, error) {
	good, bad := s.Commits[0], s.Commits[len(s.Commits)-1]
	svg := filepath.Join(g.job.StateDir, "profiles", s.ID, fmt.Sprintf("guide-%s-%s.svg", good.Short(), bad.Short()))
	g.job.FramePointers = nil // self shares are sound without them
	p := g.job.profile(ctx, good.Hash, bad.Hash, svg,
		fmt.Sprintf("==> profile-guided search: profiling the bad commit %s against the good %s, %d runs each", bad.Short(), good.Short(), g.job.Runs))
	if ctx.Err() != nil {
		return bisect.Guide{}, ctx.Err()
	}
	out := bisect.Guide{Runs: p.ParentRuns + p.CulpritRuns}
	funcs := guideFunctions(p)
	if len(funcs) == 0 {
		out.Note = fmt.Sprintf("no function's self share grew by %.0f point or more", 100*guideMinChange)
		if len(p.Warnings) > 0 {
			out.Note = p.Warnings[0]
		}
		return out, nil
	}
	ptrs, err := guidePointers(g.repo, s, funcs)
	out.Pointers = ptrs
	return out, err
}

// guidePointers says where each of funcs points in the range of s: the
// files of the bad commit's tree that define it, and the commits that
// touch them.
func guidePointers(repo *build.Repo, s *bisect.State, funcs []finding.FunctionShare) ([]bisect.GuidePointer, error) {
	changed, err := guideChangedPaths(repo, s)
	if err != nil {
		return nil, err
	}
	files, err := guideDefiningFiles(repo, s.Commits[len(s.Commits)-1].Hash, names(funcs), changed)
	if err != nil {
		return nil, err
	}
	var out []bisect.GuidePointer
	for _, f := range funcs {
		ptr := bisect.GuidePointer{Function: f.Function, Change: f.Change, P: f.P, Files: files[f.Function]}
		if len(ptr.Files) > guideMaxFiles {
			ptr.Files = nil // too common a name to point anywhere
		}
		for i, paths := range changed {
			if slices.ContainsFunc(paths, func(p string) bool { return slices.Contains(ptr.Files, p) }) {
				ptr.Commits = append(ptr.Commits, i)
			}
		}
		slices.Sort(ptr.Commits)
		out = append(out, ptr)
	}
	return out, nil
}

func names(fs []finding.FunctionShare) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Function)
	}
	return out
}

// guideFunctions are the functions of the profile to follow: the top
// GuideTop self growers by at least guideMinChange whose names are C
// identifiers, with the compiler's clone suffixes (.isra.0, .part.0,
// .constprop.0, .cold) taken off. Libraries' and the kernel's functions
// stay in the list; no file of the tree defines them.
func guideFunctions(p *finding.Profile) []finding.FunctionShare {
	var out []finding.FunctionShare
	for _, f := range p.Self {
		if len(out) == GuideTop || f.Change < guideMinChange {
			break
		}
		name, _, _ := strings.Cut(f.Function, ".")
		if !isCIdent(name) || slices.ContainsFunc(out, func(o finding.FunctionShare) bool { return o.Function == name }) {
			continue
		}
		f.Function = name
		out = append(out, f)
	}
	return out
}

func isCIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r != '_' && !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z') && !(i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// guideChangedPaths gives, for every commit of the range that can be a
// culprit (by index into s.Commits), the paths it changes.
func guideChangedPaths(repo *build.Repo, s *bisect.State) (map[int][]string, error) {
	out := map[int][]string{}
	for i := 1; i < len(s.Commits); i++ {
		if s.Commits[i].NoCompile {
			continue
		}
		paths, err := repo.ChangedPaths(s.Commits[i].Hash)
		if err != nil {
			return nil, fmt.Errorf("profile-guided search: %w", err)
		}
		out[i] = paths
	}
	return out, nil
}

// guideSourceFile reports whether path is C source a function can be
// defined in: .c and .h files, and the grammars and scanners (.y, .l)
// whose C code is generated at build time.
func guideSourceFile(path string) bool {
	switch filepath.Ext(path) {
	case ".c", ".h", ".y", ".l":
		return true
	}
	return false
}

// guideDefiningFiles finds, in the tree of commit hash, the files that
// define each of funcs: PostgreSQL's style puts a function's name at the
// start of the line of its definition, before its '(' (the return type is
// on the line above), and a prototype or call never starts a line so.
// Only the C files some commit of the range changes are read (changed):
// a function defined elsewhere points at no commit anyway. That is a
// scan of the source, not of the build's debug information: builds need
// not have DWARF (PostgreSQL's default build has none), and the source
// scan finds static functions the same way, in milliseconds per file.
func guideDefiningFiles(repo *build.Repo, hash string, funcs []string, changed map[int][]string) (map[string][]string, error) {
	c, err := repo.Git().CommitObject(plumbing.NewHash(hash))
	if err != nil {
		return nil, fmt.Errorf("profile-guided search: commit %s: %w", build.Short(hash), err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("profile-guided search: tree of %s: %w", build.Short(hash), err)
	}
	var paths []string
	for _, ps := range changed {
		for _, p := range ps {
			if guideSourceFile(p) {
				paths = append(paths, p)
			}
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	out := map[string][]string{}
	for _, p := range paths {
		f, err := tree.File(p)
		if err != nil {
			continue // deleted by the range: not in the bad tree
		}
		text, err := f.Contents()
		if err != nil {
			return nil, fmt.Errorf("profile-guided search: reading %s at %s: %w", p, build.Short(hash), err)
		}
		for _, fn := range definedIn([]byte(text), funcs) {
			out[fn] = append(out[fn], p)
		}
	}
	return out, nil
}

// definedIn returns those of funcs whose definition src holds: a line
// that starts with the name followed by '('.
func definedIn(src []byte, funcs []string) []string {
	var out []string
	for _, fn := range funcs {
		prefix := []byte(fn + "(")
		for rest := src; len(rest) > 0; {
			line := rest
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				line, rest = rest[:i], rest[i+1:]
			} else {
				rest = nil
			}
			if bytes.HasPrefix(line, prefix) && !bytes.HasSuffix(bytes.TrimSpace(line), []byte(";")) {
				out = append(out, fn)
				break
			}
		}
	}
	return out
}
