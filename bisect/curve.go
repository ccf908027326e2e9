package bisect

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A bisection of several points of a scenario's matrix (a curve: the same
// workload at 1, 4 and 16 clients) judges every point in one bisection.
//
// The design: one search per point, each a whole single-point State with
// its own samples, verdicts, checks and culprits, over the commit list
// and build set of the bisection, which they share. The searches are
// driven in lock step by curveNext, a pure function of the whole state
// like Next: a build any search asks for is done first, once, and is
// then there for every point; of the searches that want a sample, the
// one with the fewest samples so far gets the next, so samples go round
// the points in turn and a drift of the machine's speed hits every point
// alike. Each search decides and blames on its own evidence, with the
// rules and bounds of a single-point bisection.
//
// Once every search is done, each culprit found at some points is
// measured against its parent at the points where it was not found (a
// curve check: fresh samples, the search's thresholds, no blame), so the
// report can show the whole curve before and after every culprit.

// Curve is the part of a State that only a bisection of several points
// has.
type Curve struct {
	// Searches holds one search per point, in the order of
	// Inputs.Points; each has Inputs.Point set. They share the State's
	// Commits and Builds, which are saved once, in the State.
	Searches []*State `json:"searches"`
	// Planned is set once the curve checks are planned (see Check.Curve).
	Planned bool `json:"planned,omitempty"`
	// Independent turns off the hints the searches give each other (see
	// crossHints): they then share builds only, as separate bisections
	// with one build cache would. For the simulation's comparison.
	Independent bool `json:"independent,omitempty"`
}

// MarshalJSON saves the searches without the commits and builds they share
// with their State; Decode links them again.
func (c Curve) MarshalJSON() ([]byte, error) {
	type plain Curve
	cp := plain(c)
	cp.Searches = make([]*State, len(c.Searches))
	for i, s := range c.Searches {
		x := *s
		x.Commits, x.Builds = nil, nil
		cp.Searches[i] = &x
	}
	return json.Marshal(cp)
}

// NewCurveState starts a bisection of the points in.Points (two or more)
// over commits, as NewState does for one point.
func NewCurveState(in Inputs, commits []Commit, now time.Time) (*State, error) {
	if len(in.Points) < 2 {
		return nil, fmt.Errorf("a bisection of several points needs two or more, got %d", len(in.Points))
	}
	seen := map[string]bool{}
	for _, p := range in.Points {
		if seen[p] {
			return nil, fmt.Errorf("point %s is listed twice", p)
		}
		seen[p] = true
	}
	in.Point = ""
	s, err := NewState(in, commits, now)
	if err != nil {
		return nil, err
	}
	// The State itself holds no search of its own.
	s.Points, s.Pairs, s.Events = nil, nil, nil
	s.Curve = &Curve{}
	for _, p := range in.Points {
		pin := in
		pin.Points, pin.Point = nil, p
		sub, err := NewState(pin, commits, now)
		if err != nil {
			return nil, err
		}
		sub.Builds, sub.Events = s.Builds, nil
		sub.Window, sub.Plan = s.Window, s.Plan
		s.Curve.Searches = append(s.Curve.Searches, sub)
	}
	s.logf(now, "start", "", "bisecting %d commits %s..%s (%d can be culprits) on %s at %d points: %s", len(commits), commits[0].Short(),
		commits[len(commits)-1].Short(), s.CandidateCount(), in.Metric, len(in.Points), strings.Join(in.Points, " "))
	return s, nil
}

// decodeCurve links the searches of a decoded State to the commits and
// builds they share with it.
func (s *State) decodeCurve() error {
	if s.Curve == nil {
		return nil
	}
	if len(s.Curve.Searches) != len(s.Inputs.Points) {
		return fmt.Errorf("bisection state %s has %d points but %d searches: the state is damaged, start it again", s.ID, len(s.Inputs.Points), len(s.Curve.Searches))
	}
	for _, sub := range s.Curve.Searches {
		sub.Commits, sub.Builds = s.Commits, s.Builds
		if sub.Samples == nil {
			sub.Samples = map[string][]float64{}
		}
		if sub.SampleSeq == nil {
			sub.SampleSeq = map[string][]int{}
		}
	}
	return nil
}

// SetWindow sets the sample window of the bisection (see State.Window)
// and of each of its searches.
func (s *State) SetWindow(w int) {
	s.Window = w
	if s.Curve != nil {
		for _, sub := range s.Curve.Searches {
			sub.Window = w
		}
	}
}

// Searches returns the single-point searches of s: its Curve's, or s
// itself.
func (s *State) Searches() []*State {
	if s.Curve != nil {
		return s.Curve.Searches
	}
	return []*State{s}
}

// search returns the search that asked for act.
func (s *State) search(act Action) *State {
	if s.Curve != nil {
		return s.Curve.Searches[act.Point]
	}
	return s
}

// curveNext is Next for a bisection of several points.
func (s *State) curveNext(now time.Time) Action {
	defer s.drain()
	c := s.Curve
	if s.Phase == PhaseDone {
		return Action{Kind: ActDone, Pair: -1, Check: -1}
	}
	best, bestAct := -1, Action{}
	for p, sub := range c.Searches {
		if !c.Independent && sub.Phase != PhaseDone {
			sub.Hints = s.crossHints(p)
		}
		act := sub.Next(now)
		act.Point = p
		if act.Kind == ActBuild {
			s.Phase = s.curvePhase()
			return act // a build is shared: done first, once
		}
		if act.Kind == ActSample && (best < 0 || sub.SamplesTaken < c.Searches[best].SamplesTaken) {
			best, bestAct = p, act
		}
	}
	s.Phase = s.curvePhase()
	if best >= 0 {
		return bestAct
	}
	if !c.Planned {
		s.planCurveChecks(now)
		s.drain()
	}
	for p, sub := range c.Searches {
		for i := range sub.Checks {
			if !sub.Checks[i].Curve {
				continue
			}
			act, ok := sub.judgeCheck(i, now)
			if !ok && (best < 0 || sub.SamplesTaken < c.Searches[best].SamplesTaken) {
				act.Point = p
				best, bestAct = p, act
			}
		}
	}
	if best >= 0 {
		return bestAct
	}
	s.finishCurve(now)
	return Action{Kind: ActDone, Pair: -1, Check: -1}
}

// curvePhase is the phase of the least advanced search, or PhaseCheck
// while curve checks run.
func (s *State) curvePhase() Phase {
	order := []Phase{PhaseEndpoints, PhaseSearch, PhaseCheck, PhaseDone}
	least := len(order) - 1
	for _, sub := range s.Curve.Searches {
		least = min(least, slices.Index(order, sub.Phase))
	}
	if order[least] == PhaseDone {
		return PhaseCheck // the curve checks
	}
	return order[max(least, 0)]
}

// planCurveChecks plans, for each culprit of each point, a curve check at
// every point where no culprit ends at the same commit.
func (s *State) planCurveChecks(now time.Time) {
	c := s.Curve
	c.Planned = true
	for _, cu := range s.curveCulprits() {
		for p, sub := range c.Searches {
			if cu.At[p] != nil {
				continue
			}
			sub.Checks = append(sub.Checks, Check{Left: cu.Parent, Right: cu.Last, Alpha: s.Inputs.Thresholds.Alpha, Curve: true})
			sub.logf(now, "check", s.Commits[cu.Last].Hash, "measure %s against %s at %s too, for the curve (blames nothing)",
				s.RangeName(cu.Range), s.Commits[cu.Parent].Short(), sub.Inputs.Point)
		}
	}
}

// judgeCheck of a curve check uses the search's thresholds (its Alpha):
// it describes, it does not blame.

// CurveCulprit is a culprit of a bisection of several points: a commit (or
// range) blamed at one or more points, with its culprit at each.
type CurveCulprit struct {
	Range
	Candidates []int `json:"candidates"`
	// At holds, per point (in the order of Inputs.Points), the culprit
	// the search at that point confirmed, nil where it found none ending
	// at the same commit.
	At []*Culprit `json:"at"`
}

// curveCulprits merges the culprits of every point: one entry per commit
// a culprit ends at, largest effect at any point first.
func (s *State) curveCulprits() []CurveCulprit {
	var out []CurveCulprit
	n := len(s.Curve.Searches)
	for p, sub := range s.Curve.Searches {
		for k := range sub.Culprits {
			cu := &sub.Culprits[k]
			j := slices.IndexFunc(out, func(x CurveCulprit) bool { return x.Last == cu.Last })
			if j < 0 {
				out = append(out, CurveCulprit{Range: cu.Range, Candidates: cu.Candidates, At: make([]*Culprit, n)})
				j = len(out) - 1
			}
			out[j].At[p] = cu
		}
	}
	worst := func(c CurveCulprit) float64 {
		w := 0.0
		for _, a := range c.At {
			if a != nil && a.Result != nil {
				w = max(w, a.Result.Worse)
			}
		}
		return w
	}
	slices.SortStableFunc(out, func(a, b CurveCulprit) int { return cmp.Compare(worst(b), worst(a)) })
	return out
}

// CurveCulprits returns the culprits of a finished bisection of several
// points, each with its culprit at every point where it was found.
func (s *State) CurveCulprits() []CurveCulprit {
	if s.Curve == nil {
		return nil
	}
	return s.curveCulprits()
}

// CurveCheck returns the curve check of culprit range r at point p (an
// index into Inputs.Points), nil when there is none.
func (s *State) CurveCheck(p int, r Range) *Check {
	if s.Curve == nil {
		return nil
	}
	sub := s.Curve.Searches[p]
	for i := range sub.Checks {
		if ch := &sub.Checks[i]; ch.Curve && ch.Left == r.Parent && ch.Right == r.Last {
			return ch
		}
	}
	return nil
}

// finishCurve sets the outcome of the whole bisection from its points'.
func (s *State) finishCurve(now time.Time) {
	var parts []string
	outcomes := map[Outcome]int{}
	for _, sub := range s.Curve.Searches {
		outcomes[sub.Outcome]++
		parts = append(parts, fmt.Sprintf("at %s: %s", sub.Inputs.Point, sub.Summary))
	}
	s.Culprits = nil
	for _, cu := range s.curveCulprits() {
		// The culprit of the point where it is worst stands for it.
		var best *Culprit
		for _, a := range cu.At {
			if a != nil && (best == nil || a.Result.Worse > best.Result.Worse) {
				best = a
			}
		}
		s.Culprits = append(s.Culprits, *best)
	}
	switch {
	case outcomes[OutcomeBroken] > 0:
		s.Outcome = OutcomeBroken
	case outcomes[OutcomeFound] > 0:
		s.Outcome = OutcomeFound
	case outcomes[OutcomeUnresolved] > 0:
		s.Outcome = OutcomeUnresolved
	case outcomes[OutcomeNotShown] > 0:
		s.Outcome = OutcomeNotShown
	case outcomes[OutcomeImprovement] > 0:
		s.Outcome = OutcomeImprovement
	default:
		s.Outcome = OutcomeNoRegression
	}
	lead := fmt.Sprintf("%d point(s)", len(s.Curve.Searches))
	if s.Outcome == OutcomeFound {
		lead = fmt.Sprintf("%d culprit(s) over %d points", len(s.Culprits), len(s.Curve.Searches))
	}
	s.Summary = lead + "; " + strings.Join(parts, "; ")
	s.done(now)
}

// recordCurve is Record for a bisection of several points.
func (s *State) recordCurve(act Action, v float64, took time.Duration) {
	sub := s.Curve.Searches[act.Point]
	sub.Clock = append(sub.Clock, s.SamplesTaken)
	sub.Record(act, v, took)
	s.SamplesTaken++
	s.MeasureTime += took
}

// markUnmeasurableCurve is MarkUnmeasurable for a bisection of several
// points: a build that cannot be measured at one point is skipped at
// every point (the builds are shared), and each search forgets it.
func (s *State) markUnmeasurableCurve(i int, u *UnmeasurableError, now time.Time) {
	for _, sub := range s.Curve.Searches {
		sub.MarkUnmeasurable(i, u, now)
	}
	s.drain()
}

// drain moves the searches' events to the State's log, each marked with
// its point, so that one log tells the whole bisection in order.
func (s *State) drain() {
	for _, sub := range s.Curve.Searches {
		for _, e := range sub.Events {
			e.Point = sub.Inputs.Point
			e.Message = "[" + e.Point + "] " + e.Message
			s.Events = append(s.Events, e)
		}
		sub.Events = nil
	}
}

// curveSpend sums the searches' Spends.
func (s *State) curveSpend() Spend {
	var sp Spend
	for _, sub := range s.Curve.Searches {
		x := sub.Spend()
		sp.Endpoints += x.Endpoints
		sp.Search += x.Search
		sp.Checks += x.Checks
		sp.Curve += x.Curve
		sp.Regression += x.Regression
		sp.Same += x.Same
		sp.Smaller += x.Smaller
		sp.Improvement += x.Improvement
		sp.Undecided += x.Undecided
	}
	sp.Unsplit = max(0, s.SamplesTaken-sp.Total())
	return sp
}

// curveStatus is Status for a bisection of several points: the status of
// the search asking, with the bisection's totals.
func (s *State) curveStatus(act Action, now time.Time) Status {
	sub := s.Curve.Searches[act.Point]
	st := sub.Status(act, now)
	st.Phase, st.Point = s.Phase, sub.Inputs.Point
	st.Builds, st.Samples, st.Elapsed = s.BuildsDone, s.SamplesTaken, now.Sub(s.Started)
	return st
}

// PointMeasurer is a Measurer that can measure at any point of a
// bisection of several points (Inputs.Points); the engine needs one for
// such a bisection.
type PointMeasurer interface {
	MeasureAt(ctx context.Context, t Target, point string) (float64, error)
}

// measure takes the sample act asks for.
func (e *Engine) measure(ctx context.Context, s *State, act Action, t Target) (float64, error) {
	if s.Curve == nil {
		return e.Measurer.Measure(ctx, t)
	}
	pm, ok := e.Measurer.(PointMeasurer)
	if !ok {
		return 0, fmt.Errorf("bisection %s is of %d points, but the measurer measures one point only", s.ID, len(s.Curve.Searches))
	}
	return pm.MeasureAt(ctx, t, s.Curve.Searches[act.Point].Inputs.Point)
}

// crossHints are the hints of the search at point p (State.Hints): the
// State's own, and the newest commit of every suspect the other points'
// searches have found (their checks). A regression of one point is often
// one of the others too, and a right hint isolates it in two splits
// instead of a whole bisection; a wrong one costs at most two lopsided
// splits (hintSplit), never a wrong blame.
func (s *State) crossHints(p int) []int {
	hints := slices.Clone(s.Hints)
	for q, other := range s.Curve.Searches {
		if q == p {
			continue
		}
		for _, ch := range other.Checks {
			if !ch.Curve && !slices.Contains(hints, ch.Right) {
				hints = append(hints, ch.Right)
			}
		}
	}
	slices.Sort(hints)
	return hints
}
