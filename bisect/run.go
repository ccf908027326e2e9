package bisect

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Target is a built commit as the Builder returns it; the engine hands it
// back to the Measurer without looking inside.
type Target any

// Builder builds a commit (a cache hit when it was built before). A commit
// that does not build gives an error for which errors.Is(err, ErrBroken)
// holds, best a *BrokenError; it is skipped. Any other error stops the
// bisection, which can be resumed.
type Builder interface {
	Build(ctx context.Context, hash string) (Target, error)
}

// Measurer takes one sample of the bisection's metric at its point on a
// build: one workload run on a freshly started server. A build that cannot
// be measured gives an error for which errors.Is(err, ErrUnmeasurable)
// holds, best an *UnmeasurableError; it is skipped. Any other error stops
// the bisection, which can be resumed.
type Measurer interface {
	Measure(ctx context.Context, t Target) (float64, error)
}

// Saver stores the State; the engine calls it after every build and every
// sample. The results store implements it (store.Store).
type Saver interface {
	SaveBisection(ctx context.Context, s *State) error
}

// ErrBroken marks a commit that does not build.
var ErrBroken = errors.New("commit does not build")

// BrokenError is a build failure with what the report needs.
type BrokenError struct {
	Reason  string // a short reason, such as the last lines of the log
	LogPath string // the full build log
}

func (e *BrokenError) Error() string        { return "commit does not build: " + e.Reason }
func (e *BrokenError) Is(target error) bool { return target == ErrBroken }

// ErrUnmeasurable marks a commit that builds but cannot be measured.
var ErrUnmeasurable = errors.New("commit cannot be measured")

// UnmeasurableError is a sample that failed on a build: initdb failed, the
// server did not start or crashed, or the workload failed on it.
type UnmeasurableError struct {
	Reason    string // one line: what failed
	ServerLog string // the tail of the server log
	LogPath   string // the whole server log, if kept
}

func (e *UnmeasurableError) Error() string        { return "commit cannot be measured: " + e.Reason }
func (e *UnmeasurableError) Is(target error) bool { return target == ErrUnmeasurable }

// ScenarioError is returned by Run when neither endpoint can be measured:
// the scenario, not a build, is broken. Nothing of it is recorded, so the
// bisection can be run again once the scenario is fixed.
type ScenarioError struct {
	Good, Bad string // short hashes
	// GoodErr and BadErr are the endpoints' failures.
	GoodErr, BadErr *UnmeasurableError
}

func (e *ScenarioError) Error() string {
	return fmt.Sprintf("the scenario cannot be measured on either endpoint, so the scenario (not a commit) is at fault: fix it and run again:\n"+
		"  good %s: %s\n  bad %s: %s\nserver log of %s:\n%s", e.Good, e.GoodErr.Reason, e.Bad, e.BadErr.Reason, e.Bad, e.BadErr.ServerLog)
}

// Engine runs a bisection: it asks State.Next what to do, does it through
// its Builder and Measurer, records the result and saves the State.
type Engine struct {
	Builder  Builder
	Measurer Measurer
	Saver    Saver // nil: nothing is saved
	// Progress, when set, is called before every build and every sample.
	Progress func(Status)
	// Now is the clock (time.Now when nil); a test seam.
	Now func() time.Time
	// Guide profiles the endpoints of a profile-guided search (see
	// Guide); nil: such a search goes on unguided, saying so.
	Guide GuideFunc
	// Machine names the machine taking the samples; "" leaves the
	// bisection's machine as it is. A bisection resumed on another machine
	// than the one that took its samples restarts its comparisons in
	// flight (State.Arrive).
	Machine string

	targets map[string]Target // builds available in this process, by key
}

// Run continues the bisection in s until it is done or ctx is cancelled.
// It can be called on a State loaded from a Saver: the search resumes
// where it stopped, reusing every build and sample recorded.
func (e *Engine) Run(ctx context.Context, s *State) error {
	now := e.Now
	if now == nil {
		now = time.Now
	}
	e.targets = map[string]Target{}
	if s.SamplesTaken > 0 && !s.Done() {
		s.logf(now(), "resume", "", "resuming with %d samples and %d builds recorded", s.SamplesTaken, s.BuildsDone)
	}
	if err := e.arrive(ctx, s, now); err != nil {
		return err
	}
	// Spent counts this run's time from here; an interrupted step, which
	// records nothing, counts nothing.
	last := now()
	spend := func() {
		t := now()
		s.Spent += t.Sub(last)
		last = t
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		act := s.Next(now())
		if act.Kind == ActDone {
			spend()
			s.Updated = now()
			return e.save(ctx, s)
		}
		if act.Kind == ActGuide {
			if err := e.guide(ctx, s, now); err != nil {
				return err
			}
			spend()
			if err := e.save(ctx, s); err != nil {
				return err
			}
			continue
		}
		c := s.Commits[act.Commit]
		if e.Progress != nil {
			e.Progress(s.Status(act, now()))
		}
		t, err := e.target(ctx, s, act.Commit, now)
		if err != nil {
			return err
		}
		if act.Kind == ActSample && t != nil {
			start := now()
			v, err := e.measure(ctx, s, act, t)
			switch {
			case err != nil && ctx.Err() != nil:
				return ctx.Err() // interrupted: nothing is recorded
			case errors.Is(err, ErrUnmeasurable):
				if err := e.unmeasurable(ctx, s, act, unmeasurableOf(err), now); err != nil {
					return err
				}
			case err != nil:
				return fmt.Errorf("measuring %s: %w", c.Short(), err)
			default:
				s.Record(act, v, now().Sub(start))
			}
			s.Updated = now()
		}
		spend()
		if err := e.save(ctx, s); err != nil {
			return err
		}
	}
}

// target returns the build of commit i, building it when this process has
// not yet. It returns nil without error when the commit does not build.
func (e *Engine) target(ctx context.Context, s *State, i int, now func() time.Time) (Target, error) {
	c := s.Commits[i]
	if t, ok := e.targets[c.Key]; ok {
		return t, nil
	}
	if s.Skipped(i) {
		return nil, nil
	}
	hash := s.keyOwner(i)
	start := now()
	t, err := e.Builder.Build(ctx, hash)
	d := now().Sub(start)
	if err != nil && !errors.Is(err, ErrBroken) {
		return nil, fmt.Errorf("building %s: %w", c.Short(), err)
	}
	if s.Builds[c.Key] == nil {
		s.BuildsDone++
		s.BuildTime += d
		b := &BuildResult{Hash: hash, Duration: d}
		if err != nil {
			b.Broken, b.Reason = true, err.Error()
			var be *BrokenError
			if errors.As(err, &be) {
				b.Reason, b.LogPath = be.Reason, be.LogPath
			}
			s.logf(now(), "broken", hash, "%s does not build: skipped (%s)", c.Short(), b.Reason)
		} else {
			s.logf(now(), "build", hash, "built %s in %s", c.Short(), d.Round(time.Second))
		}
		s.Builds[c.Key] = b
	}
	if err != nil {
		return nil, nil
	}
	e.targets[c.Key] = t
	return t, nil
}

// unmeasurable records that the commit of act cannot be measured. At an
// endpoint, while the endpoints are compared, it first measures the other
// endpoint: when that fails too, the scenario is at fault and Run stops
// with a *ScenarioError, recording nothing.
func (e *Engine) unmeasurable(ctx context.Context, s *State, act Action, u *UnmeasurableError, now func() time.Time) error {
	n := len(s.Commits) - 1
	if sub := s.search(act); sub.Phase == PhaseEndpoints && (act.Commit == 0 || act.Commit == n) {
		other := n - act.Commit
		if len(sub.Samples[s.Commits[other].Key]) == 0 {
			t, err := e.target(ctx, s, other, now)
			if err != nil {
				return err
			}
			if t != nil {
				start := now()
				v, err := e.measure(ctx, s, Action{Kind: ActSample, Commit: other, Point: act.Point}, t)
				switch {
				case err != nil && ctx.Err() != nil:
					return ctx.Err()
				case errors.Is(err, ErrUnmeasurable):
					se := &ScenarioError{Good: s.Commits[0].Short(), Bad: s.Commits[n].Short(), GoodErr: u, BadErr: unmeasurableOf(err)}
					if act.Commit == n {
						se.GoodErr, se.BadErr = se.BadErr, se.GoodErr
					}
					return se
				case err != nil:
					return fmt.Errorf("measuring %s: %w", s.Commits[other].Short(), err)
				}
				s.Record(Action{Kind: ActSample, Commit: other, Pair: 0, Check: -1, Point: act.Point}, v, now().Sub(start))
			}
		}
	}
	s.MarkUnmeasurable(act.Commit, u, now())
	return nil
}

// unmeasurableOf returns err's *UnmeasurableError, or one made of its text.
func unmeasurableOf(err error) *UnmeasurableError {
	var u *UnmeasurableError
	if errors.As(err, &u) {
		return u
	}
	return &UnmeasurableError{Reason: err.Error()}
}

// keyOwner returns the hash to build for commit i's key: the oldest commit
// of the range with that key, so that commits sharing a key (doc-only
// commits and their parent) are built once, as the parent.
func (s *State) keyOwner(i int) string {
	for i > 0 && s.Commits[i].NoCompile {
		i--
	}
	return s.Commits[i].Hash
}

// Record adds sample v, taken for act, to s.
func (s *State) Record(act Action, v float64, took time.Duration) {
	if s.Curve != nil {
		s.recordCurve(act, v, took)
		return
	}
	if act.Check >= 0 {
		ch := &s.Checks[act.Check]
		if act.Commit == ch.Left {
			ch.A = append(ch.A, v)
		} else {
			ch.B = append(ch.B, v)
		}
	} else {
		if act.Pair >= 0 {
			s.Pairs[act.Pair].Taken++
		}
		k := s.Commits[act.Commit].Key
		s.Samples[k] = append(s.Samples[k], v)
		if s.Window > 0 {
			s.SampleSeq[k] = append(s.SampleSeq[k], s.SamplesTaken)
		}
	}
	s.SamplesTaken++
	s.MeasureTime += took
}

func (e *Engine) save(ctx context.Context, s *State) error {
	if e.Saver == nil {
		return nil
	}
	if err := e.Saver.SaveBisection(ctx, s); err != nil {
		return fmt.Errorf("saving bisection %s: %w", s.ID, err)
	}
	return nil
}

// arrive records the engine's machine in s (State.Arrive), saving a move,
// and has the Saver mark the samples no comparison will use.
func (e *Engine) arrive(ctx context.Context, s *State, now func() time.Time) error {
	if s.Arrive(e.Machine, now()) != nil {
		if err := e.save(ctx, s); err != nil {
			return err
		}
	}
	if sup, ok := e.Saver.(Superseder); ok && !s.Done() {
		if err := sup.SupersedeSamples(ctx, s); err != nil {
			return fmt.Errorf("marking superseded samples of bisection %s: %w", s.ID, err)
		}
	}
	return nil
}
