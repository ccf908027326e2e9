package bisect

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// This file is what a bisection costs: the estimate of what is left of
// it, and the time bound (State.MaxTime) at which the planner stops with
// a partial answer. Both are pure functions of the State, like the rest
// of the search: the time spent (State.Spent) is in the State, so a
// resumed bisection keeps counting and stops where it would have.

// Next decides what to do next. It is deterministic: the same State always
// gives the same Action, which is what makes resuming exact. It records the
// decisions that need no I/O (verdicts, splits, the outcome) in s, so it
// must be called again after each result is recorded.
//
// When the bisection has a time bound and the next build or sample would
// be expected to end past it (Spent plus the mean duration of such a step
// so far), the bisection stops there with OutcomeTimeBound.
func (s *State) Next(now time.Time) Action {
	if s.Curve != nil {
		// A bisection of several points has no time bound (the request
		// refuses one): its searches' partial answers are not joined yet.
		return s.next(now)
	}
	for {
		act := s.next(now)
		if act.Kind == ActDone || !s.pastBound(act) {
			return act
		}
		s.stopAtBound(now)
	}
}

// pastBound reports whether act is expected to end past the time bound.
func (s *State) pastBound(act Action) bool {
	if s.MaxTime <= 0 {
		return false
	}
	perSample, perBuild := s.meanDurations()
	var d time.Duration
	if s.Builds[s.Commits[act.Commit].Key] == nil {
		d += perBuild
	}
	switch act.Kind {
	case ActSample:
		d += perSample
	case ActGuide:
		d += 2 * DefaultGuideRuns * perSample // profiled runs cost about a sample each
	}
	return s.Spent+d > s.MaxTime
}

// Estimate is what is left of a bisection as its planner sees it. It is
// an estimate, not a bound: Lo assumes one culprit in each range still
// followed and comparisons as large as the bisection's have been so far;
// Hi every comparison and check run to its sample budget. More culprits,
// forced choices and commits that cannot be built add to both.
type Estimate struct {
	SamplesLo, SamplesHi int
	// Builds is the midpoints left to build: one per split.
	Builds int
	// PerSample and PerBuild are the mean durations of a sample and a
	// build so far; zero before the first.
	PerSample, PerBuild time.Duration
}

// TimeLo and TimeHi are the time left at the measured durations; zero
// before the first sample.
func (e Estimate) TimeLo() time.Duration { return e.time(e.SamplesLo) }
func (e Estimate) TimeHi() time.Duration { return e.time(e.SamplesHi) }

func (e Estimate) time(samples int) time.Duration {
	if e.PerSample == 0 {
		return 0
	}
	return time.Duration(samples)*e.PerSample + time.Duration(e.Builds)*e.PerBuild
}

// String is "40–300 samples and 3 builds, about 25m–2h10m" (without the
// time before the first sample).
func (e Estimate) String() string {
	out := fmt.Sprintf("%d–%d samples and %d builds", e.SamplesLo, e.SamplesHi, e.Builds)
	if e.PerSample > 0 {
		out += fmt.Sprintf(", about %s–%s", roundDuration(e.TimeLo()), roundDuration(e.TimeHi()))
	}
	return out
}

// roundDuration rounds d to what a person wants to read: seconds under
// ten minutes, minutes above.
func roundDuration(d time.Duration) time.Duration {
	if d < 10*time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Minute)
}

// Estimate returns what is left of the bisection.
func (s *State) Estimate() Estimate {
	var e Estimate
	e.PerSample, e.PerBuild = s.meanDurations()
	if s.Done() {
		return e
	}
	if s.Curve != nil {
		// Several points: their searches' samples add up; builds are
		// shared, so the point needing the most bounds them from below.
		for _, sub := range s.Searches() {
			se := sub.Estimate()
			e.SamplesLo += se.SamplesLo
			e.SamplesHi += se.SamplesHi
			e.Builds = max(e.Builds, se.Builds)
		}
		return e
	}
	th := s.Inputs.Thresholds
	// The typical comparison: the mean of those decided so far (both
	// sides) once there are a few, else half its budget.
	typ, n := 0, 0
	for _, p := range s.Pairs {
		if p.Verdict != VerdictPending && p.Taken > 0 {
			typ += p.Taken
			n++
		}
	}
	if n >= 3 {
		typ /= n
	} else {
		typ = th.MaxSamples
	}
	typCheck, n := 0, 0
	for _, ch := range s.Checks {
		if ch.Verdict != VerdictPending {
			typCheck += len(ch.A) + len(ch.B)
			n++
		}
	}
	if n > 0 {
		typCheck /= n
	} else {
		typCheck = CheckBudget * typ
	}
	maxCmp, maxCheck := 2*th.MaxSamples, 2*CheckBudget*th.MaxSamples
	// Under Plan 1 a split costs one comparison, and at worst a merged one
	// beside it at the end; under Plan 0 two.
	perSplitLo := 1
	if s.Plan < 1 {
		perSplitLo = 2
	}
	pending := func(taken, size int) int { return max(0, size-taken) }
	search := func(cands int) {
		splits := splitsLeft(cands)
		e.SamplesLo += splits*perSplitLo*typ + typCheck
		e.SamplesHi += splits*2*maxCmp + maxCheck
		e.Builds += splits
	}
	switch s.Phase {
	case PhaseEndpoints:
		p := s.Pairs[0]
		e.SamplesLo += pending(p.Taken, typ)
		e.SamplesHi += pending(p.Taken, maxCmp)
		search(s.CandidateCount())
	case PhaseSearch:
		charged := map[int]bool{}
		for j := 0; j+1 < len(s.Points); j++ {
			k := s.pairIndex(s.Points[j], s.Points[j+1])
			p := s.Pairs[k]
			switch {
			case s.deferred(k):
				// Judged at the end, most often as the same.
				e.SamplesHi += maxCmp
			case p.followed():
				search(len(s.candidates(p.Left, p.Right)))
			case p.Verdict == VerdictPending:
				e.SamplesLo += pending(p.Taken, typ)
				e.SamplesHi += pending(p.Taken, maxCmp)
				// The rest of its parent's search: one level is this
				// comparison.
				if q := p.Parent; q >= 0 && s.Pairs[q].followed() && !charged[q] {
					charged[q] = true
					cands := len(s.candidates(s.Pairs[q].Left, s.Pairs[q].Right))
					search(max(1, (cands+1)/2))
				}
			}
		}
	case PhaseCheck:
		for _, ch := range s.Checks {
			if ch.Verdict == VerdictPending {
				e.SamplesLo += pending(len(ch.A)+len(ch.B), typCheck)
				e.SamplesHi += pending(len(ch.A)+len(ch.B), maxCheck)
			}
		}
	}
	e.SamplesHi = max(e.SamplesHi, e.SamplesLo)
	return e
}

// meanDurations are the mean durations of a sample and a build so far;
// zero before the first.
func (s *State) meanDurations() (perSample, perBuild time.Duration) {
	if s.SamplesTaken > 0 {
		perSample = s.MeasureTime / time.Duration(s.SamplesTaken)
	}
	if s.BuildsDone > 0 {
		perBuild = s.BuildTime / time.Duration(s.BuildsDone)
	}
	return perSample, perBuild
}

// adjacent reports whether no commit between l and r can split them.
func (s *State) adjacent(l, r int) bool {
	_, ok := s.midpoint(l, r)
	return !ok
}

// splitsLeft is the number of splits a binary search of cands
// candidates needs to name one: ceil(log2(cands)).
func splitsLeft(cands int) int {
	if cands <= 1 {
		return 0
	}
	return int(math.Ceil(math.Log2(float64(cands))))
}

// Budget is the line a bisection starts with: its sample budget, what is
// left of it and its time bound.
func (s *State) Budget() string {
	th := s.Inputs.Thresholds
	out := fmt.Sprintf("budget: up to %d samples per side per comparison, %d per check; estimated %s left",
		th.MaxSamples, CheckBudget*th.MaxSamples, s.Estimate())
	if s.SamplesTaken == 0 {
		out += " (times once the first sample is taken)"
	}
	if s.MaxTime > 0 {
		out += fmt.Sprintf("; time bound %s, %s spent", s.MaxTime, roundDuration(s.Spent))
	}
	return out
}

// SetMaxTime sets the time bound of the bisection to d (0: none). A
// bisection stopped at its bound continues from where it stopped when d
// lies past the time spent; SetMaxTime reports whether it did.
func (s *State) SetMaxTime(d time.Duration, now time.Time) bool {
	old := s.MaxTime
	s.MaxTime = d
	if s.Outcome != OutcomeTimeBound || (d > 0 && d <= s.Spent) {
		return false
	}
	s.Phase, s.StoppedIn = s.StoppedIn, ""
	s.Outcome, s.Summary = "", ""
	s.Culprits, s.Unresolved, s.Unconfirmed, s.Unjudged = nil, nil, nil, nil
	bound := "none"
	if d > 0 {
		bound = d.String()
	}
	s.logf(now, "resume", "", "time bound raised from %s to %s (%s spent): continuing the %s", old, bound, roundDuration(s.Spent), s.Phase)
	return true
}

// stopAtBound ends the bisection at its time bound with what it has: the
// culprits whose checks confirmed them, the ranges the search narrowed
// the regression to (Unresolved), the ranges beside a regression not yet
// judged (Unjudged), and the verdicts made (in Pairs, Checks and Events).
// Nothing is blamed that a check has not confirmed.
func (s *State) stopAtBound(now time.Time) {
	s.StoppedIn = s.Phase
	where := ""
	switch s.Phase {
	case PhaseEndpoints:
		where = "before the endpoints were judged"
		p := s.Pairs[0]
		a, b := s.recent(s.Commits[p.Left].Key, p.From), s.recent(s.Commits[p.Right].Key, p.From)
		if len(a) >= 3 && len(b) >= 3 {
			c := stats.Compare(a, b, s.Inputs.Direction, s.Inputs.Thresholds)
			where += fmt.Sprintf(" (so far %s)", resultOf(c))
		}
	case PhaseSearch:
		where = "in the search"
		s.narrowed()
	case PhaseCheck:
		where = "while re-verifying suspects"
		s.checkResults()
		for _, ch := range s.Checks {
			if ch.Verdict == VerdictPending {
				s.Unresolved = append(s.Unresolved, Range{Parent: ch.Left, First: ch.Left + 1, Last: ch.Right,
					Result: s.Pairs[s.pairIndex(ch.Left, ch.Right)].Result,
					Note:   "the search located the regression here; its check with fresh samples was not finished, so nothing is blamed"})
			}
		}
	}
	s.Outcome = OutcomeTimeBound
	verdicts := len(s.Judgements())
	var parts []string
	for _, c := range s.Culprits {
		parts = append(parts, fmt.Sprintf("culprit %s (%s)", s.RangeName(c.Range), s.change(c.Result)))
	}
	for _, u := range s.Unresolved {
		parts = append(parts, fmt.Sprintf("the regression lies in %s (%s)", s.RangeName(u), plural(len(s.candidates(u.Parent, u.Last)), "candidate")))
	}
	if len(s.Unjudged) > 0 {
		parts = append(parts, fmt.Sprintf("%d range(s) beside a regression not yet judged", len(s.Unjudged)))
	}
	s.Summary = fmt.Sprintf("stopped at the time bound of %s (%s spent) %s, after %d verdicts", s.MaxTime, roundDuration(s.Spent), where, verdicts)
	if len(parts) > 0 {
		s.Summary += ": " + strings.Join(parts, "; ")
	}
	s.Summary += "; resume with a longer --max-time to finish"
	s.done(now)
}

// narrowed sets Unresolved to the ranges the search has narrowed the
// regression to, and Unjudged to the deferred ranges beside it: for each
// pair of adjacent points, a followed pair is such a range; a pair not
// yet judged stands for the followed pair it was split from.
func (s *State) narrowed() {
	seen := map[int]bool{}
	var ks []int
	for j := 0; j+1 < len(s.Points); j++ {
		k := s.pairIndex(s.Points[j], s.Points[j+1])
		p := s.Pairs[k]
		switch {
		case s.deferred(k) || (p.Merged && p.Verdict == VerdictPending):
			s.Unjudged = append(s.Unjudged, Range{Parent: p.Left, First: p.Left + 1, Last: p.Right,
				Note: "beside a regression, not yet judged: it may hold another one"})
			continue
		case p.Verdict == VerdictPending && !p.Inferred:
			for k >= 0 && !s.Pairs[k].followed() {
				k = s.Pairs[k].Parent
			}
		case !p.followed():
			continue
		}
		if k >= 0 && !seen[k] {
			seen[k] = true
			ks = append(ks, k)
		}
	}
	for _, k := range ks {
		p := s.Pairs[k]
		note := "the search narrowed the regression to this range when it stopped"
		switch {
		case p.Verdict != VerdictRegression:
			note += " (followed by a forced choice or an inference, not its own verdict)"
		case s.adjacent(p.Left, p.Right):
			note = "a suspect: the search judged it a regression, but no check with fresh samples has confirmed it, so nothing is blamed"
		}
		s.Unresolved = append(s.Unresolved, Range{Parent: p.Left, First: p.Left + 1, Last: p.Right, Result: p.Result, Note: note})
	}
}

// Judgement is one verdict a bisection made: a comparison of the search
// or a check.
type Judgement struct {
	Left, Right int // indices into State.Commits
	// Check is set for a re-verification with fresh samples.
	Check   bool
	Verdict Verdict
	Result  *Result
}

// Judgements returns the verdicts made so far, the search's in the order
// its comparisons started, then the checks'.
func (s *State) Judgements() []Judgement {
	var out []Judgement
	for _, p := range s.Pairs {
		if p.Verdict != VerdictPending && !p.Dropped {
			out = append(out, Judgement{Left: p.Left, Right: p.Right, Verdict: p.Verdict, Result: p.Result})
		}
	}
	for _, ch := range s.Checks {
		if ch.Verdict != VerdictPending {
			out = append(out, Judgement{Left: ch.Left, Right: ch.Right, Check: true, Verdict: ch.Verdict, Result: ch.Result})
		}
	}
	return out
}

// plural is "1 candidate", "2 candidates".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
