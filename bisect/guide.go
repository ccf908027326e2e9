package bisect

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Guide records a profile-guided search (docs/bisect.md, "Profile-guided
// search"). Once the endpoints are shown to differ, and before the first
// split, the engine asks its GuideFunc what a CPU profile of the bad
// commit against the good one points at: the functions whose share grew,
// the files that define them, and the commits of the range that touch
// those files. Those commits become State.Hints, which the search isolates
// first (hintSplit). A profile is evidence, never a verdict: a hint only
// changes where the search splits, and every culprit is still blamed by a
// check with fresh samples.
//
// A State with no Guide is not profile-guided (as every state saved
// before it existed).
type Guide struct {
	// Done is set once the profile was asked for: what it gave, perhaps
	// nothing, is final. A bisection interrupted while profiling asks
	// again when it resumes.
	Done bool `json:"done,omitempty"`
	// Pointers are the functions the profile named, largest growth first.
	Pointers []GuidePointer `json:"pointers,omitempty"`
	// Note says what the profile gave when it points at no commit: why
	// (no perf, no function grew, functions outside the tree's changed
	// files).
	Note string `json:"note,omitempty"`
	// Runs counts the profiled workload runs of both endpoints: runs the
	// guide cost that SamplesTaken does not count.
	Runs int `json:"runs,omitempty"`
}

// GuidePointer is one function whose CPU share grew from the good commit
// to the bad one, the files of the bad commit's tree that define it, and
// the commits of the range that touch those files.
type GuidePointer struct {
	Function string `json:"function"`
	// Change is the growth of its self share, a fraction of all CPU
	// samples (+0.42: 42 points more).
	Change float64 `json:"change"`
	// P is the rank test's p over the profiled runs.
	P       float64  `json:"p,omitempty"`
	Files   []string `json:"files,omitempty"`
	Commits []int    `json:"commits,omitempty"` // indices into State.Commits
}

// GuideFunc profiles the endpoints of s (both built and shown to differ)
// and says what the profile points at. An error is recorded as the
// Guide's note and the search goes on unguided; only a cancelled context
// stops the bisection.
type GuideFunc func(ctx context.Context, s *State) (Guide, error)

// DefaultGuideRuns is the profiled runs each endpoint gets to guide the
// search. Three a side show a function whose share grew by several points;
// the rank test cannot be sure of anything with so few (p >= 0.1), and
// need not be: a hint only orders the search, it never blames.
const DefaultGuideRuns = 3

// guidePending reports whether the search waits for the profile of the
// endpoints (ActGuide).
func (s *State) guidePending() bool { return s.Guide != nil && !s.Guide.Done }

// guide performs ActGuide: it asks e.Guide and records the answer.
func (e *Engine) guide(ctx context.Context, s *State, now func() time.Time) error {
	g := Guide{Note: "this engine has no profiler"}
	if e.Guide != nil {
		var err error
		g, err = e.Guide(ctx, s)
		if ctx.Err() != nil {
			return ctx.Err() // asked again on resume
		}
		if err != nil {
			g = Guide{Runs: g.Runs, Note: "no profile: " + err.Error()}
		}
	}
	s.SetGuide(g, now())
	return nil
}

// SetGuide records what a profile of the endpoints points at, and makes
// the commits it names (those that can be culprits) the search's hints.
func (s *State) SetGuide(g Guide, now time.Time) {
	g.Done = true
	var hints []int
	for pi := range g.Pointers {
		p := &g.Pointers[pi]
		p.Commits = slices.DeleteFunc(slices.Clone(p.Commits), func(i int) bool {
			return i <= 0 || i >= len(s.Commits) || s.Commits[i].NoCompile
		})
		slices.Sort(p.Commits)
		p.Commits = slices.Compact(p.Commits)
		hints = append(hints, p.Commits...)
		s.logf(now, "guide", "", "%s", s.pointerLine(*p))
	}
	slices.Sort(hints)
	s.Hints = slices.Compact(hints)
	if len(s.Hints) == 0 && g.Note == "" {
		g.Note = "the profile points at no commit of the range"
	}
	s.Guide = &g
	switch {
	case len(s.Hints) > 0:
		s.logf(now, "guide", "", "profile-guided search: %d of %d candidates tried first", len(s.Hints), s.CandidateCount())
	default:
		s.logf(now, "guide", "", "profile-guided search: plain bisection (%s)", g.Note)
	}
}

// pointerLine says what one function of the profile points at: "profile
// points at NextCopyFrom (src/backend/commands/copyfromparse.c, +42.6
// points): 2 commits touch it".
func (s *State) pointerLine(p GuidePointer) string {
	where := "defined in no file the range changes"
	if len(p.Files) > 0 {
		where = strings.Join(p.Files, ", ")
	}
	n := fmt.Sprintf("%d commits touch it", len(p.Commits))
	switch len(p.Commits) {
	case 0:
		n = "no commit touches it"
	case 1:
		n = "1 commit touches it: " + s.Commits[p.Commits[0]].Short()
	}
	return fmt.Sprintf("profile points at %s (%s, self share %+.1f points): %s", p.Function, where, 100*p.Change, n)
}

// GuideSummary says in one line what guided the search, "" when it was not
// profile-guided.
func (s *State) GuideSummary() string {
	g := s.Guide
	if g == nil {
		return ""
	}
	if !g.Done {
		return "profile-guided search: the endpoints were not profiled"
	}
	var parts []string
	for _, p := range g.Pointers {
		if len(p.Commits) > 0 {
			parts = append(parts, s.pointerLine(p))
		}
	}
	if len(parts) == 0 {
		return "profile-guided search: plain bisection (" + g.Note + ")"
	}
	return "profile-guided search: " + strings.Join(parts, "; ")
}

// guideRuns is the profiled runs the guide cost.
func (s *State) guideRuns() int {
	if s.Guide == nil {
		return 0
	}
	return s.Guide.Runs
}
