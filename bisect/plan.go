package bisect

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// ActionKind is what the search asks the engine to do next.
type ActionKind int

const (
	// ActDone: the bisection is finished.
	ActDone ActionKind = iota
	// ActBuild: build Commit to learn whether it builds.
	ActBuild
	// ActSample: take one sample of Commit (building it first if needed).
	ActSample
	// ActGuide: profile the endpoints and record what the profile points
	// at (State.SetGuide), before the first split of a profile-guided
	// search.
	ActGuide
)

// Action is the next piece of I/O the search needs.
type Action struct {
	Kind   ActionKind
	Commit int // index into State.Commits
	// Pair is the index into State.Pairs being sampled, or -1.
	Pair int
	// Check is the index into State.Checks being sampled, or -1. A check
	// sample goes to the check only, never to State.Samples.
	Check int
	// Point is, in a bisection of several points, the index into
	// Curve.Searches of the search asking (Pair and Check are its own);
	// 0 otherwise.
	Point int
}

// next decides what to do next, the time bound aside (see Next).
func (s *State) next(now time.Time) Action {
	if s.Curve != nil {
		return s.curveNext(now)
	}
	for {
		if n := len(s.Commits) - 1; s.Phase != PhaseDone && (s.Skipped(0) || s.Skipped(n)) {
			s.finishBroken(now)
			continue
		}
		switch s.Phase {
		case PhaseEndpoints:
			act, ok := s.judgePair(0, now)
			if !ok {
				return act
			}
			switch s.Pairs[0].Verdict {
			case VerdictRegression:
				s.Phase = PhaseSearch
			case VerdictImprovement:
				s.finishEndpoints(now, OutcomeImprovement)
			case VerdictSame:
				s.finishEndpoints(now, OutcomeNoRegression)
			default:
				s.finishEndpoints(now, OutcomeNotShown)
			}
		case PhaseSearch:
			if s.guidePending() {
				return Action{Kind: ActGuide, Commit: len(s.Commits) - 1, Pair: -1, Check: -1}
			}
			act, ok := s.searchStep(now)
			if !ok {
				return act
			}
			s.startChecks(now)
		case PhaseCheck:
			for i := range s.Checks {
				act, ok := s.judgeCheck(i, now)
				if !ok {
					return act
				}
			}
			s.finish(now)
		default:
			return Action{Kind: ActDone, Pair: -1, Check: -1}
		}
	}
}

// searchStep judges every pair of adjacent points, left to right, and
// splits each pair judged a regression at its midpoint until it is
// adjacent. It reports true when nothing is left to judge or split.
//
// Under Plan 1 a split costs one comparison, not two: the older half is
// judged, and the newer half is followed without a comparison when the
// older one is the same or smaller (settle), or deferred when the older
// one is a regression. Deferred pairs are judged last, each run of adjacent ones
// as one merged pair (mergeDeferred), so the ranges beside a culprit are
// shown free of another one once, not at every level of the search.
func (s *State) searchStep(now time.Time) (Action, bool) {
	for {
		act, ok := s.searchPass(now)
		if !ok || s.explain(now) || !s.mergeDeferred(now) {
			return act, ok
		}
	}
}

func (s *State) searchPass(now time.Time) (Action, bool) {
	for j := 0; j+1 < len(s.Points); j++ {
		l, r := s.Points[j], s.Points[j+1]
		k := s.pairIndex(l, r)
		if s.deferred(k) {
			continue // judged at the end (mergeDeferred)
		}
		if !s.Pairs[k].Inferred || s.Pairs[k].Verdict != VerdictPending {
			if act, ok := s.judgePair(k, now); !ok {
				return act, false
			}
		}
		s.settle(k, now)
		if s.force(s.Pairs[k].Parent, now) {
			j = -1 // a pair to the left may now be followed
			continue
		}
		if !s.Pairs[k].followed() {
			continue
		}
		m, ok := s.midpoint(l, r)
		if !ok && s.Pairs[k].Inferred {
			// An inferred pair becomes a suspect only on its own
			// evidence: judged now, it stays followed if a regression.
			if act, ok := s.judgePair(k, now); !ok {
				return act, false
			}
			if s.force(s.Pairs[k].Parent, now) {
				j = -1
			}
			continue
		}
		if !ok {
			continue // adjacent: a suspect
		}
		if s.Plan >= 1 {
			m = s.builtMidpoint(l, r, m)
		}
		if s.Builds[s.Commits[m].Key] == nil {
			return Action{Kind: ActBuild, Commit: m, Pair: -1, Check: -1}, false
		}
		s.Points = slices.Insert(s.Points, j+1, m)
		s.Pairs = append(s.Pairs, Pair{Left: l, Right: m, Parent: k}, Pair{Left: m, Right: r, Parent: k})
		s.logf(now, "split", s.Commits[m].Hash, "split %s..%s (%d candidates) at %s",
			s.Commits[l].Short(), s.Commits[r].Short(), len(s.candidates(l, r)), s.Commits[m].Short())
		j-- // judge (l, m) next
	}
	return Action{}, true
}

// followed reports whether the search splits the pair further.
//
// An inferred pair is followed until it is judged: that happens only when
// it is adjacent, and then its own verdict decides.
func (p Pair) followed() bool {
	return p.Verdict == VerdictRegression || p.Forced || (p.Inferred && p.Verdict == VerdictPending)
}

// settle decides, under Plan 1, what becomes of the newer half of a split
// once its older half, pair k, is judged: when k is the same or smaller
// (then k is deferred too), the regression of their parent lies in the
// newer half, which is followed (Inferred) without a comparison; when k
// is a regression, the newer half is deferred (see mergeDeferred). Otherwise (inconclusive, improved) the
// newer half is judged as before. A wrong inference costs samples, never
// a wrong blame: a culprit is only ever blamed by a check with fresh
// samples.
func (s *State) settle(k int, now time.Time) {
	if s.firstNewer(k) {
		if p := &s.Pairs[k]; p.Verdict == VerdictSmaller && !p.Deferred {
			p.Deferred = true
			s.logf(now, "defer", s.Commits[p.Right].Hash, "%s..%s is smaller than the endpoints' change too: both halves of the first split are judged again at the end",
				s.Commits[p.Left].Short(), s.Commits[p.Right].Short())
		}
		return
	}
	if !s.olderHalf(k) {
		return
	}
	p, sib := s.Pairs[k], &s.Pairs[k+1]
	if s.Plan >= explainPlan && p.Parent == 0 {
		// The first split judges its newer half too (firstNewer): an
		// endpoints' regression that neither half holds was noise, or is
		// made of parts, and is judged again as one merged pair instead of
		// being followed down a chain of inferences.
		if p.Verdict == VerdictSmaller && !p.Deferred {
			s.Pairs[k].Deferred = true
		}
		if p.Verdict == VerdictRegression {
			sib.Deferred = true
		}
		return
	}
	switch p.Verdict {
	case VerdictSame, VerdictSmaller:
		what := "the same"
		if p.Verdict == VerdictSmaller {
			s.Pairs[k].Deferred = true
			what = "smaller than " + s.RangeName(Range{First: s.Pairs[p.Parent].Left, Last: s.Pairs[p.Parent].Right}) + "'s change"
		}
		sib.Inferred = true
		s.logf(now, "infer", s.Commits[sib.Right].Hash, "%s..%s is %s, so the regression lies in %s..%s: followed without a comparison",
			s.Commits[p.Left].Short(), s.Commits[p.Right].Short(), what, s.Commits[sib.Left].Short(), s.Commits[sib.Right].Short())
	case VerdictRegression:
		sib.Deferred = true
	}
}

// firstNewer reports whether pair k is, from Plan 3, the newer half of the
// first split, judged after its older half was judged the same or smaller:
// it is judged with the rule of an older half (VerdictSmaller against the
// endpoints' change), so that a regression neither half holds is not
// followed down a chain of inferences.
func (s *State) firstNewer(k int) bool {
	if s.Plan < explainPlan || k < 2 {
		return false
	}
	p, old := s.Pairs[k], s.Pairs[k-1]
	return p.Parent == 0 && old.Parent == 0 && old.Right == p.Left && !p.Merged && !p.Dropped && !old.Dropped &&
		(old.Verdict == VerdictSame || old.Verdict == VerdictSmaller)
}

// olderHalf reports whether pair k is, under Plan 1, the older half of a
// split whose newer half (pair k+1) is not yet judged, inferred or
// deferred.
func (s *State) olderHalf(k int) bool {
	if s.Plan < 1 || k+1 >= len(s.Pairs) {
		return false
	}
	p, sib := s.Pairs[k], s.Pairs[k+1]
	return p.Parent >= 0 && !p.Merged && !p.Dropped && sib.Parent == p.Parent && sib.Left == p.Right && !sib.Dropped &&
		sib.Verdict == VerdictPending && !sib.Inferred && !sib.Deferred && s.Pairs[p.Parent].Left == p.Left
}

// parentChange is the change (Result.Worse) of the nearest pair above k
// that was judged with a change for the worse: the regression its split
// looks for.
func (s *State) parentChange(k int) float64 {
	for q := s.Pairs[k].Parent; q >= 0; q = s.Pairs[q].Parent {
		if r := s.Pairs[q].Result; r != nil && r.Worse > 0 && s.Pairs[q].followed() {
			return r.Worse
		}
	}
	return 0
}

// mergeDeferred judges the deferred pairs once nothing else is left to
// do: each run of adjacent deferred pairs (often of one) becomes one
// merged pair over the run, whose inner points leave the search. It
// reports whether it changed anything.
func (s *State) mergeDeferred(now time.Time) bool {
	if s.Plan < 1 {
		return false
	}
	changed := false
	for j := 0; j+1 < len(s.Points); j++ {
		k := s.pairIndex(s.Points[j], s.Points[j+1])
		if !s.deferred(k) {
			continue
		}
		end, widest := j+1, k
		for end+1 < len(s.Points) {
			n := s.pairIndex(s.Points[end], s.Points[end+1])
			if !s.deferred(n) {
				break
			}
			if len(s.candidates(s.Pairs[n].Left, s.Pairs[n].Right)) > len(s.candidates(s.Pairs[widest].Left, s.Pairs[widest].Right)) {
				widest = n
			}
			end++
		}
		changed = true
		// A run of one pair is judged as a merged pair of one (the
		// deferred pair itself stays as it was, so that nothing defers
		// it again).
		l, r := s.Points[j], s.Points[end]
		// The widest pair's parent holds the whole run: the run lies beside
		// the chain of regressions that pair's sibling started.
		s.Pairs = append(s.Pairs, Pair{Left: l, Right: r, Parent: s.Pairs[widest].Parent, Merged: true})
		s.Points = slices.Delete(s.Points, j+1, end)
		s.logf(now, "merge", s.Commits[r].Hash, "%s..%s (%d candidates, %d ranges left beside a regression) is judged as one",
			s.Commits[l].Short(), s.Commits[r].Short(), len(s.candidates(l, r)), end-j)
	}
	return changed
}

// deferred reports whether pair k waits for mergeDeferred: deferred and
// not yet judged, or judged smaller than its parent (which says nothing
// about a smaller regression of its own).
func (s *State) deferred(k int) bool {
	p := s.Pairs[k]
	if s.Plan >= explainPlan && p.Parent >= 0 && s.Pairs[p.Parent].Unexplained {
		return false // the regression it lay beside was not reproduced
	}
	return p.Deferred && !p.Dropped && (p.Verdict == VerdictPending || p.Verdict == VerdictSmaller)
}

// builtMidpoint returns, under Plan 1, a commit already built that splits
// the candidates of (l, r] no worse than one quarter to three quarters,
// the closest to m; m when there is none. A merged pair holds the points
// of the pairs it was made of, and splitting at one of them saves a build.
func (s *State) builtMidpoint(l, r, m int) int {
	if b := s.Builds[s.Commits[m].Key]; b != nil {
		return m
	}
	kl, kr := s.Commits[l].Key, s.Commits[r].Key
	total := len(s.candidates(l, r))
	best, bestD, left := m, math.MaxInt, 0
	for i := l + 1; i < r; i++ {
		c := s.Commits[i]
		if c.NoCompile {
			continue
		}
		left++
		b := s.Builds[c.Key]
		if b == nil || s.Skipped(i) || c.Key == kl || c.Key == kr || 4*left < total || 4*left > 3*total {
			continue
		}
		if d := abs(i - m); d < bestD {
			best, bestD = i, d
		}
	}
	return best
}

// force makes a forced choice among the halves of pair k once both are
// judged: when the pair is followed but neither half is a regression, the
// regression must lie in one of them (unless the pair's own verdict was
// wrong), so the search follows the half that got worse, not judged the
// same. It reports whether it forced a half.
//
// Forcing turns a question the budget cannot answer ("is this half
// different?") into an easier one ("which half got worse?"); a wrong
// choice costs builds and samples, never a wrong blame, because a culprit
// is only ever blamed by a check with fresh samples.
func (s *State) force(k int, now time.Time) bool {
	if k < 0 || !s.Pairs[k].followed() {
		return false
	}
	var kids []int
	for c := k + 1; c < len(s.Pairs); c++ {
		if s.Pairs[c].Parent == k && !s.Pairs[c].Dropped && !(s.Plan >= explainPlan && s.Pairs[c].Merged) {
			// From Plan 3 a merged pair, judged by its own rule, is no
			// half to force.
			kids = append(kids, c)
		}
	}
	// Of the halves that got worse, follow the one with the stronger
	// evidence: the smaller rank-test p-value, which unlike the ratio of
	// medians stays meaningful when runs fall into two modes.
	best, bestP := -1, 2.0
	for _, c := range kids {
		p := s.Pairs[c]
		if p.Verdict == VerdictPending || p.followed() {
			return false
		}
		if p.Verdict != VerdictSame && p.Verdict != VerdictSmaller && p.Result != nil && p.Result.Worse > 0 && p.Result.P < bestP {
			best, bestP = c, p.Result.P
		}
	}
	if best < 0 || s.halvesExplain(k, kids, now) {
		return false
	}
	p := &s.Pairs[best]
	p.Forced = true
	s.logf(now, "force", s.Commits[p.Right].Hash, "neither half of %s..%s is a regression within the budget; following %s..%s, the half that got worse (%s)",
		s.Commits[s.Pairs[k].Left].Short(), s.Commits[s.Pairs[k].Right].Short(), s.Commits[p.Left].Short(), s.Commits[p.Right].Short(), p.Result)
	return true
}

// pairIndex returns the index of the latest pair (l, r) not dropped.
func (s *State) pairIndex(l, r int) int {
	for k := len(s.Pairs) - 1; k >= 0; k-- {
		if s.Pairs[k].Left == l && s.Pairs[k].Right == r && !s.Pairs[k].Dropped {
			return k
		}
	}
	panic(fmt.Sprintf("bisect: no pair for points %d..%d", l, r))
}

// candidates returns the commits in (l, r] that can be culprits: those
// that change what is compiled.
func (s *State) candidates(l, r int) []int {
	var c []int
	for i := l + 1; i <= r; i++ {
		if !s.Commits[i].NoCompile {
			c = append(c, i)
		}
	}
	return c
}

// midpoint returns the commit strictly between l and r to measure next: the
// one that splits the candidates of (l, r] most evenly among those that
// may build and be measured, and whose build differs from both ends. It reports false when
// there is none, that is when l and r are adjacent as far as measuring can
// tell.
func (s *State) midpoint(l, r int) (int, bool) {
	if m, ok := s.hintSplit(l, r); ok {
		return m, true
	}
	kl, kr := s.Commits[l].Key, s.Commits[r].Key
	total := len(s.candidates(l, r))
	best, bestD, left := -1, math.MaxInt, 0
	for i := l + 1; i < r; i++ {
		c := s.Commits[i]
		if c.NoCompile {
			continue
		}
		left++
		if s.Skipped(i) || c.Key == kl || c.Key == kr {
			continue
		}
		if d := abs(2*left - total); d < bestD {
			best, bestD = i, d
		}
	}
	return best, best >= 0
}

// hintSplit chooses, when a hinted commit h lies in (l, r], the split
// that isolates it: at h itself when it lies inside, so that (l, h) holds
// it; when h is r, at the last commit before it that can split, so that
// (m, h) is adjacent. A right hint names the culprit in two splits; a
// wrong one costs at most two lopsided splits before it leaves the range.
// Of several hints the one nearest the range's middle is taken.
func (s *State) hintSplit(l, r int) (int, bool) {
	if len(s.Hints) == 0 {
		return 0, false
	}
	kl, kr := s.Commits[l].Key, s.Commits[r].Key
	can := func(i int) bool {
		c := s.Commits[i]
		return !c.NoCompile && !s.Skipped(i) && c.Key != kl && c.Key != kr
	}
	best, bestD := -1, math.MaxInt
	for _, h := range s.Hints {
		if h <= l || h > r || s.Commits[h].NoCompile || s.Skipped(h) {
			continue
		}
		m := -1
		if h < r && can(h) {
			m = h
		} else {
			for i := h - 1; i > l; i-- {
				if can(i) {
					m = i
					break
				}
			}
		}
		if m < 0 {
			continue
		}
		if d := abs(2*m - l - r); d < bestD {
			best, bestD = m, d
		}
	}
	return best, best >= 0
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// judgePair samples pair k until its comparison is decided and records the
// verdict. It reports true when the pair has a verdict.
func (s *State) judgePair(k int, now time.Time) (Action, bool) {
	p := &s.Pairs[k]
	if p.Verdict != VerdictPending {
		return Action{}, true
	}
	l, r := s.Commits[p.Left], s.Commits[p.Right]
	if l.Key == r.Key {
		p.Verdict = VerdictSame
		s.logf(now, "verdict", r.Hash, "%s..%s: same build, same server", l.Short(), r.Short())
		return Action{}, true
	}
	if p.Target == 0 {
		p.From = s.SamplesTaken
	}
	var smaller func(stats.Comparison) bool
	if olderHalf := s.olderHalf(k) || s.firstNewer(k); olderHalf || p.Merged {
		// The older half of a split need not be shown the same: it is
		// enough to show that it does not hold its parent's regression,
		// whose change is theta; its own smaller regressions are looked
		// for at the end (VerdictSmaller, mergeDeferred). A merged pair
		// need only show that it holds no regression of the minimum
		// effect: its upper bound alone, not the whole interval, inside
		// the band of "same".
		theta := s.Inputs.Thresholds.MinEffect
		if olderHalf {
			theta = max(theta, SmallerShare*s.parentChange(k))
		}
		smaller = func(c stats.Comparison) bool {
			worseHi := c.Hi - 1
			if s.Inputs.Direction == stats.HigherIsBetter {
				worseHi = 1 - c.Lo
			}
			return c.A.N >= SmallerFrom && c.B.N >= SmallerFrom && worseHi < theta
		}
	}
	side, c := s.decide(s.recent(l.Key, p.From), s.recent(r.Key, p.From), &p.Target, s.Inputs.Thresholds, s.orderSeed(2*k), smaller)
	if c == nil {
		return Action{Kind: ActSample, Commit: [2]int{p.Left, p.Right}[side], Pair: k, Check: -1}, false
	}
	p.Verdict = verdictOf(c.Verdict)
	if c.Verdict == stats.Unknown {
		p.Verdict = VerdictSmaller
	}
	p.Result = resultOf(*c)
	s.logf(now, "verdict", r.Hash, "%s..%s: %s, %s", l.Short(), r.Short(), p.Verdict, p.Result)
	return Action{}, true
}

// SmallerShare and SmallerFrom rule VerdictSmaller: the older half of a
// split is judged smaller once the upper bound of its change for the
// worse is below SmallerShare times its parent's change (and MinEffect),
// with at least SmallerFrom samples per side.
const (
	SmallerShare = 0.75
	SmallerFrom  = 10
)

// CurrentPlan is State.Plan of a new bisection. Plan 0 judges both halves
// of every split; Plan 1 judges the older half and infers or defers the
// newer one (see searchStep); Plan 3 (2 was an experiment, not kept)
// judges both halves of the first split against the endpoints' change
// (firstNewer) and stops when the suspects explain the endpoints' change
// (explain.go) unless State.Exhaustive.
const CurrentPlan = 3

// DefaultWindow is State.Window of a new bisection: every search
// comparison is judged on samples of both sides taken interleaved since
// it started, plus those taken in the 10 samples before (the end of the
// comparison before it, which shares a commit with it), so drift of the
// machine's speed over the hours of a bisection hits both sides alike.
// Reusing older samples saves about half the samples on a steady machine
// but, under drift, loses culprits and spends the savings on phantom
// regressions; docs/bisect.md has the simulations that chose it.
const DefaultWindow = 10

// recent returns the samples of key that a comparison started at from
// may use: those younger than Window samples then (taken at from or
// later when Window is 1), or all of them when Window is 0.
//
// Samples taken on another machine than the current one are never used
// (State.MachineFrom, see Arrive).
func (s *State) recent(key string, from int) []float64 {
	xs := s.Samples[key][min(s.MachineFrom[key], len(s.Samples[key])):]
	if s.Window <= 0 {
		return xs
	}
	i, _ := slices.BinarySearch(s.SampleSeq[key][len(s.Samples[key])-len(xs):], from-s.Window+1)
	return xs[i:]
}

// CheckBudget multiplies the sample budget and the batch of a check: a
// check tests at a smaller alpha than the search (the wrong-blame bound
// split over the suspects) and is the last word on a culprit, so it may
// sample longer; larger batches keep the number of looks, and so the cost
// of calibrating stats' sequential boundary, as in the search.
const CheckBudget = 2

// judgeCheck samples check i with fresh samples until it is decided.
func (s *State) judgeCheck(i int, now time.Time) (Action, bool) {
	ch := &s.Checks[i]
	if ch.Verdict != VerdictPending {
		return Action{}, true
	}
	l, r := s.Commits[ch.Left], s.Commits[ch.Right]
	if s.Skipped(ch.Left) || s.Skipped(ch.Right) {
		ch.Verdict = VerdictUnmeasurable
		s.logf(now, "check", r.Hash, "re-verify %s against %s: cannot be measured any more, nothing blamed", r.Short(), l.Short())
		return Action{}, true
	}
	th := s.Inputs.Thresholds
	th.Alpha = ch.Alpha
	if !ch.Curve { // a curve check describes, with the search's budget
		th.MaxSamples *= CheckBudget
		th.Batch *= CheckBudget
	}
	side, c := s.decide(ch.A, ch.B, &ch.Target, th, s.orderSeed(2*i+1), nil)
	if c == nil {
		return Action{Kind: ActSample, Commit: [2]int{ch.Left, ch.Right}[side], Pair: -1, Check: i}, false
	}
	ch.Verdict = verdictOf(c.Verdict)
	ch.Result = resultOf(*c)
	if ch.Curve {
		s.logf(now, "check", r.Hash, "%s against %s at %s, for the curve: %s, %s", r.Short(), l.Short(), s.Inputs.Point, ch.Verdict, ch.Result)
		return Action{}, true
	}
	s.logf(now, "check", r.Hash, "re-verify %s against %s with fresh samples (alpha %.3g): %s, %s", r.Short(), l.Short(), ch.Alpha, ch.Verdict, ch.Result)
	return Action{}, true
}

// decide returns the side (0 for a, 1 for b) to sample next (in the order
// seed gives, see nextSide), or the comparison once it is decided. target is the number of samples per side
// to reach before the next look; it follows th's planned looks, counted on
// the smaller side, so a side that already has samples from other
// comparisons is reused, never resampled.
//
// When smaller is not nil and holds for an undecided look, decide stops
// there and returns the comparison with verdict Unknown.
func (s *State) decide(a, b []float64, target *int, th stats.Thresholds, seed uint64, smaller func(stats.Comparison) bool) (int, *stats.Comparison) {
	if *target == 0 {
		*target = th.FirstLook()
	}
	if side := nextSide(len(a), len(b), *target, seed); side >= 0 {
		return side, nil
	}
	c := stats.Compare(a, b, s.Inputs.Direction, th)
	if c.Verdict == stats.Unknown && smaller != nil && smaller(c) {
		return -1, &c
	}
	c, more := th.Look(c, false)
	if more > 0 {
		*target = min(len(a), len(b)) + more
		return nextSide(len(a), len(b), *target, seed), nil
	}
	return -1, &c
}

// nextSide interleaves the samples of two sides up to target each, in
// the one sample order of every comparison (stats.Order with seed): the
// side with fewer samples first, and at equal counts in blocks of A B B A
// whose first side seed draws (side A always, with seed 0, the order of
// states saved before seeds). It returns -1 when both sides have target
// samples. The order depends only on the counts and the seed, so a
// resumed bisection continues it exactly.
func nextSide(na, nb, target int, seed uint64) int {
	if na >= target && nb >= target {
		return -1
	}
	return stats.Order{Seed: seed, Targets: 2}.Next([]int{na, nb})
}

// orderSeed is the seed of the sample order (nextSide) of comparison k:
// pair k is 2k, check i is 2i+1. States saved before orders were seeded
// have OrderSeed 0 and keep side A first.
func (s *State) orderSeed(k int) uint64 {
	if s.OrderSeed == 0 {
		return 0
	}
	return stats.Mix64(s.OrderSeed+uint64(k)) | 1
}

// startChecks lists the suspects (adjacent pairs judged regressions) and
// plans their re-verification. The wrong-blame bound is split over them
// (Bonferroni), so the chance that any check blames a commit that
// changed nothing is at most Inputs.WrongBlame, whatever happened in the
// search before: a check uses fresh samples only.
func (s *State) startChecks(now time.Time) {
	var sus [][2]int
	for j := 0; j+1 < len(s.Points); j++ {
		l, r := s.Points[j], s.Points[j+1]
		if s.Pairs[s.pairIndex(l, r)].followed() {
			sus = append(sus, [2]int{l, r})
		}
	}
	s.Phase = PhaseCheck
	if len(sus) == 0 {
		return
	}
	// The share is rounded down to WrongBlame/2^k, so that few distinct
	// levels occur (each costs stats a calibration).
	alpha := s.Inputs.WrongBlame
	for n := 1; n < len(sus); n *= 2 {
		alpha /= 2
	}
	for _, p := range sus {
		s.Checks = append(s.Checks, Check{Left: p[0], Right: p[1], Alpha: alpha})
	}
	s.logf(now, "check", "", "%d suspect(s); re-verifying each against its parent with fresh samples", len(sus))
}

// finish turns the checks and the search's pairs into culprits, ranges and
// an outcome.
func (s *State) finish(now time.Time) {
	s.checkResults()
	s.Unresolved = s.unresolved()
	s.recheckExplained(now)

	switch {
	case len(s.Culprits) > 0:
		s.Outcome = OutcomeFound
		var parts []string
		for _, c := range s.Culprits {
			parts = append(parts, fmt.Sprintf("%s (%s)", s.RangeName(c.Range), s.change(c.Result)))
		}
		s.Summary = fmt.Sprintf("%d culprit(s) of the %s regression (%s), worst first: %s", len(s.Culprits), s.Inputs.Metric, s.better(), strings.Join(parts, ", "))
		if len(s.Unresolved) > 0 {
			s.Summary += fmt.Sprintf("; %d range(s) could not be narrowed within the budget", len(s.Unresolved))
		}
		if ex := s.Explained; ex != nil && ex.Confirmed {
			s.Summary += fmt.Sprintf("; they explain the endpoints' change (the rest %s, at worst %+.1f%%), so the %d range(s) beside them were not judged",
				ex.Recheck.Remainder, 100*ex.Recheck.Bound, len(ex.Ranges))
		}
	default:
		s.Outcome = OutcomeUnresolved
		if len(s.Unresolved) == 0 {
			s.Unresolved = []Range{{Parent: 0, First: 1, Last: len(s.Commits) - 1, Result: s.Pairs[0].Result,
				Note: "the regression lies somewhere in the range; no part of it could be confirmed within the budget"}}
		}
		s.Summary = fmt.Sprintf("the endpoints differ (%s) but no single culprit could be confirmed within the budget: %d range(s) left, %d suspect(s) not confirmed",
			s.Pairs[0].Result, len(s.Unresolved), len(s.Unconfirmed))
	}
	s.done(now)
}

// checkResults turns the decided checks into culprits, largest effect
// first, and unconfirmed suspects; checks still running are left out (a
// bisection stopped at its time bound).
func (s *State) checkResults() {
	for _, ch := range s.Checks {
		if ch.Verdict == VerdictPending {
			continue
		}
		rg := Range{Parent: ch.Left, First: ch.Left + 1, Last: ch.Right, Result: ch.Result}
		if ch.Verdict == VerdictUnmeasurable {
			rg.Note = "the search judged it a regression but a commit of its check could not be measured any more"
			s.Unconfirmed = append(s.Unconfirmed, rg)
			continue
		}
		if ch.Verdict != VerdictRegression {
			rg.Note = fmt.Sprintf("the search judged it a regression but fresh samples did not confirm it (%s)", ch.Verdict)
			s.Unconfirmed = append(s.Unconfirmed, rg)
			continue
		}
		cands := s.candidates(ch.Left, ch.Right)
		rg.First, rg.Last = cands[0], cands[len(cands)-1]
		if len(cands) > 1 {
			rg.Note = fmt.Sprintf("%d candidate commits: the commits between %s, so the culprit cannot be told apart", len(cands), s.skipWhy(cands[:len(cands)-1]))
		}
		s.Culprits = append(s.Culprits, Culprit{Range: rg, Candidates: cands, Search: s.Pairs[s.pairIndex(ch.Left, ch.Right)].Result})
	}
	slices.SortStableFunc(s.Culprits, func(a, b Culprit) int { return cmp.Compare(b.Result.Worse, a.Result.Worse) })
}

// unresolved returns the ranges known to hold a regression that the search
// could not pin on a confirmed culprit: a followed pair whose halves were
// both judged the same (the regression was noise, or made of parts each
// below the minimum effect), and, for each suspect that its check did not
// confirm after forced choices, the last pair that was judged a regression
// on its own evidence.
func (s *State) unresolved() []Range {
	var out []Range
	seen := map[int]bool{}
	add := func(k int, note string) {
		if seen[k] {
			return
		}
		seen[k] = true
		p := s.Pairs[k]
		out = append(out, Range{Parent: p.Left, First: p.Left + 1, Last: p.Right, Result: p.Result, Note: note})
	}
	for k, p := range s.Pairs {
		if !p.followed() || p.Dropped {
			continue
		}
		same := 0
		for c := k + 1; c < len(s.Pairs); c++ {
			if s.Pairs[c].Parent == k && s.Pairs[c].Verdict == VerdictSame && !s.Pairs[c].Forced && !s.Pairs[c].Dropped {
				same++
			}
		}
		if same == 2 {
			add(k, "both halves were judged the same: the regression may be noise, or made of changes each smaller than the minimum effect")
		}
		if p.Unexplained {
			add(k, "neither half is a regression, and together they change it by less than the minimum effect: the regression may be noise, or made of changes each smaller than the minimum effect")
		}
	}
	for _, ch := range s.Checks {
		if ch.Verdict == VerdictRegression || ch.Verdict == VerdictUnmeasurable {
			continue
		}
		k := s.pairIndex(ch.Left, ch.Right)
		if !s.Pairs[k].Forced && !s.Pairs[k].Inferred {
			continue
		}
		for (s.Pairs[k].Forced || s.Pairs[k].Inferred) && s.Pairs[k].Parent >= 0 {
			k = s.Pairs[k].Parent
		}
		add(k, fmt.Sprintf("the regression lies here; the search narrowed it to %s by forced choices, but a check with fresh samples did not confirm it within the budget",
			s.RangeName(Range{First: ch.Left + 1, Last: ch.Right})))
	}
	return out
}

func (s *State) finishEndpoints(now time.Time, o Outcome) {
	s.Outcome = o
	p := s.Pairs[0]
	g, b := s.Commits[0], s.Commits[len(s.Commits)-1]
	switch o {
	case OutcomeImprovement:
		s.Summary = fmt.Sprintf("no regression: %s is better than %s on %s, %s (%s)", b.Short(), g.Short(), s.Inputs.Metric, s.better(), p.Result)
	case OutcomeNoRegression:
		// Only an equivalence verdict says so: the whole interval is
		// within the minimum effect.
		s.Summary = fmt.Sprintf("no regression reproduced: %s is within ±%.3g%% of %s on %s, %s (%s, %s)",
			b.Short(), 100*s.Inputs.Thresholds.MinEffect, g.Short(), s.Inputs.Metric, s.better(), p.Verdict, p.Result)
	default:
		s.Summary = fmt.Sprintf("could not show a regression within the budget: %s is neither shown worse than %s on %s nor within ±%.3g%% of it, %s (%s, %s); "+
			"more samples (--max-samples or stats.max_samples, now %d per side) or a larger workload (--set rows=...) can decide it",
			b.Short(), g.Short(), s.Inputs.Metric, 100*s.Inputs.Thresholds.MinEffect, s.better(), p.Verdict, p.Result, s.Inputs.Thresholds.MaxSamples)
	}
	s.done(now)
}

func (s *State) finishBroken(now time.Time) {
	s.Outcome = OutcomeBroken
	var which []string
	what := "does not build"
	for _, i := range []int{0, len(s.Commits) - 1} {
		if s.Skipped(i) {
			b := s.Builds[s.Commits[i].Key]
			which = append(which, fmt.Sprintf("%s (%s)", s.Commits[i].Short(), b.Reason))
			if b.Unmeasurable {
				what = "cannot be measured"
			}
		}
	}
	s.Summary = fmt.Sprintf("cannot bisect: an endpoint %s: %s", what, strings.Join(which, ", "))
	s.done(now)
}

func (s *State) done(now time.Time) {
	s.Phase = PhaseDone
	s.logf(now, "outcome", "", "%s: %s", s.Outcome, s.Summary)
	sp := s.Spend()
	s.logf(now, "spend", "", "%d samples: %s", sp.Total(), sp)
}

// RangeName is "abc1234567" for one commit, "abc..def" for several.
func (s *State) RangeName(r Range) string {
	if r.First == r.Last {
		return s.Commits[r.First].Short()
	}
	return s.Commits[r.First].Short() + ".." + s.Commits[r.Last].Short()
}

func verdictOf(v stats.Verdict) Verdict {
	switch v {
	case stats.Same:
		return VerdictSame
	case stats.Regression:
		return VerdictRegression
	case stats.Improvement:
		return VerdictImprovement
	}
	return VerdictInconclusive
}

func resultOf(c stats.Comparison) *Result {
	return &Result{
		MedianA: c.A.Median, MedianB: c.B.Median, NA: c.A.N, NB: c.B.N,
		RelA: stats.Finite(c.A.RelStddev), RelB: stats.Finite(c.B.RelStddev),
		Ratio: stats.Finite(c.Ratio), Lo: stats.Finite(c.Lo), Hi: stats.Finite(c.Hi), P: c.P, Worse: stats.Finite(c.Worse()),
		Warnings: c.Warnings,
	}
}

// String is "+12.3% [+8.1%, +16.0%], p=0.0001, n=15+15".
func (r *Result) String() string {
	if r == nil {
		return "no comparison"
	}
	return fmt.Sprintf("%+.1f%% [%+.1f%%, %+.1f%%], p=%.2g, n=%d+%d", 100*(r.Ratio-1), 100*(r.Lo-1), 100*(r.Hi-1), r.P, r.NA, r.NB)
}
