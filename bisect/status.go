package bisect

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// ID derives a bisection's identifier from its inputs, so that running the
// same command again finds and resumes the same bisection.
func ID(in Inputs) string {
	if in.Thresholds == (stats.Thresholds{}) {
		in.Thresholds = DefaultThresholds
	}
	in.Thresholds = in.Thresholds.WithDefaults()
	if in.WrongBlame == 0 {
		in.WrongBlame = 0.01
	}
	data, err := json.Marshal(in)
	if err != nil {
		panic(err) // Inputs holds only plain values
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// Status is what a person watching a bisection wants to know, taken
// before each build or sample.
type Status struct {
	Phase Phase
	// Point is the matrix point sampled, in a bisection of several
	// points; empty otherwise.
	Point  string
	Step   string // "build" or "sample"
	Commit Commit // the commit under test
	// Against is the other commit of the comparison being sampled.
	Against *Commit
	// Done and Of count the samples of the current comparison, both sides.
	Done, Of int
	// Verdicts counts comparisons decided so far, Regressions those judged
	// regressions.
	Verdicts, Regressions int
	// RangeLeft counts the commits that can still be culprits: candidates
	// of the pairs not yet judged or judged regressions.
	RangeLeft int
	// Builds and Samples are the totals so far.
	Builds, Samples int
	// Elapsed is the time since the bisection started.
	Elapsed time.Duration
	// Left is the estimate of what is left (see State.Estimate).
	Left Estimate
	// MaxTime is the bisection's time bound (0: none) and Spent the time
	// counted against it.
	MaxTime, Spent time.Duration
}

// Status describes the bisection as act is about to be performed.
func (s *State) Status(act Action, now time.Time) Status {
	if s.Curve != nil {
		return s.curveStatus(act, now)
	}
	st := Status{
		Phase: s.Phase, Step: "sample", Commit: s.Commits[act.Commit],
		Builds: s.BuildsDone, Samples: s.SamplesTaken, Elapsed: now.Sub(s.Started),
		Left: s.Estimate(), MaxTime: s.MaxTime, Spent: s.Spent,
	}
	if act.Kind == ActBuild {
		st.Step = "build"
	}
	if act.Pair >= 0 {
		p := s.Pairs[act.Pair]
		st.Against = s.other(p.Left, p.Right, act.Commit)
		na, nb := len(s.recent(s.Commits[p.Left].Key, p.From)), len(s.recent(s.Commits[p.Right].Key, p.From))
		st.Done = na + nb
		st.Of = 2 * max(p.Target, na, nb)
	}
	if act.Check >= 0 {
		ch := s.Checks[act.Check]
		st.Against = s.other(ch.Left, ch.Right, act.Commit)
		st.Done, st.Of = len(ch.A)+len(ch.B), 2*ch.Target
	}
	for _, p := range s.Pairs {
		if p.Dropped {
			continue
		}
		if p.Verdict != VerdictPending {
			st.Verdicts++
		}
		if p.Verdict == VerdictRegression {
			st.Regressions++
		}
	}
	for j := 0; j+1 < len(s.Points); j++ {
		p := s.Pairs[s.pairIndex(s.Points[j], s.Points[j+1])]
		if p.Verdict == VerdictPending || p.Verdict == VerdictRegression {
			st.RangeLeft += len(s.candidates(p.Left, p.Right))
		}
	}
	return st
}

func (s *State) other(l, r, i int) *Commit {
	if i == l {
		return &s.Commits[r]
	}
	return &s.Commits[l]
}

// String is one line of progress.
func (st Status) String() string {
	what := fmt.Sprintf("%s %s", st.Step, st.Commit.Short())
	if st.Point != "" && st.Step == "sample" {
		what += " at " + st.Point
	}
	if st.Against != nil {
		what += " vs " + st.Against.Short()
	}
	if st.Of > 0 {
		what += fmt.Sprintf(" (%d of %d samples)", st.Done+1, st.Of)
	}
	out := fmt.Sprintf("[%s] %s: %s; %d verdicts (%d regressions), %d candidate commits left, %d builds, %d samples, %s elapsed",
		st.Phase, what, st.Commit.Subject, st.Verdicts, st.Regressions, st.RangeLeft, st.Builds, st.Samples, st.Elapsed.Round(time.Second))
	if st.Left.PerSample > 0 {
		out += fmt.Sprintf(", about %s–%s left", roundDuration(st.Left.TimeLo()), roundDuration(st.Left.TimeHi()))
	} else {
		out += fmt.Sprintf(", %d–%d samples left", st.Left.SamplesLo, st.Left.SamplesHi)
	}
	if st.MaxTime > 0 {
		out += fmt.Sprintf(" (bound %s, %s spent)", st.MaxTime, roundDuration(st.Spent))
	}
	return out
}
