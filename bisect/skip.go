package bisect

import (
	"slices"
	"time"
)

// MarkUnmeasurable records that commit i builds but a sample on it failed
// in a way its build causes (see UnmeasurableError). Its key is skipped
// from then on like a key that does not build: never measured again,
// never blamed, a candidate of any culprit range it borders. The record
// is part of the State, so a resumed bisection does not try it again.
//
// When the commit is an interior point of the search, the search forgets
// it: the pair that was split at it, and everything split from there, is
// dropped, and the pair is split again at another commit (or, when none
// is left, becomes a suspect whose candidates include the skipped one).
// In the check phase, the checks that need it end unmeasurable and blame
// nothing. An endpoint that cannot be measured ends the bisection
// (OutcomeBroken); the engine tells that apart from a scenario that
// measures neither endpoint first.
func (s *State) MarkUnmeasurable(i int, u *UnmeasurableError, now time.Time) {
	if s.Curve != nil {
		s.markUnmeasurableCurve(i, u, now)
		return
	}
	c := s.Commits[i]
	b := s.Builds[c.Key]
	if b == nil {
		b = &BuildResult{Hash: s.keyOwner(i)}
		s.Builds[c.Key] = b
	}
	b.Unmeasurable, b.Reason, b.ServerLog, b.LogPath = true, u.Reason, u.ServerLog, u.LogPath
	s.logf(now, "unmeasurable", c.Hash, "%s builds but cannot be measured: skipped (%s)", c.Short(), u.Reason)
	if s.Phase != PhaseSearch {
		return
	}
	j := slices.Index(s.Points, i)
	if j <= 0 || j == len(s.Points)-1 {
		return
	}
	// The pair split at i is the latest live pair with a live child
	// (Left, i): a pair containing i higher up was split elsewhere.
	split := -1
	for k := len(s.Pairs) - 1; k >= 0 && split < 0; k-- {
		p := s.Pairs[k]
		if p.Dropped || p.Parent < 0 || p.Right != i {
			continue
		}
		if q := s.Pairs[p.Parent]; !q.Dropped && q.Left == p.Left && q.Left < i && i < q.Right {
			split = p.Parent
		}
	}
	if split < 0 {
		return
	}
	l, r := s.Pairs[split].Left, s.Pairs[split].Right
	// Drop every pair descended from the split pair (children come after
	// their parents in Pairs), and the points inside it.
	gone := map[int]bool{split: false}
	for k := split + 1; k < len(s.Pairs); k++ {
		p := &s.Pairs[k]
		if _, ok := gone[p.Parent]; ok && !p.Dropped {
			p.Dropped, gone[k] = true, true
		}
	}
	s.Points = slices.DeleteFunc(s.Points, func(x int) bool { return l < x && x < r })
	s.logf(now, "unsplit", c.Hash, "%s..%s is split again without %s", s.Commits[l].Short(), s.Commits[r].Short(), c.Short())
}

// skipWhy says why the commits cands cannot be measured: "do not build",
// "cannot be measured" or both.
func (s *State) skipWhy(cands []int) string {
	var broken, unmeasurable bool
	for _, i := range cands {
		if b := s.Builds[s.Commits[i].Key]; b != nil {
			broken = broken || b.Broken
			unmeasurable = unmeasurable || b.Unmeasurable
		}
	}
	switch {
	case unmeasurable && broken:
		return "do not build or cannot be measured"
	case unmeasurable:
		return "cannot be measured"
	}
	return "do not build"
}
