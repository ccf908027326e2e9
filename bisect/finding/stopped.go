package finding

import (
	"time"

	"github.com/pgbisect/pgbisect/bisect"
)

// Stopped is a bisection that stopped at its time bound before it was
// done: the bound, the time it spent, where it was, the ranges it had
// narrowed the regression to and the verdicts it had made. It continues
// when resumed with a longer bound.
type Stopped struct {
	MaxTimeSeconds float64 `json:"max_time_seconds"`
	SpentSeconds   float64 `json:"spent_seconds"`
	// Phase is where it stopped: endpoints, search or check.
	Phase string `json:"phase"`
	// Ranges are the ranges the regression was narrowed to, suspects
	// whose checks were not finished among them; nothing in them is
	// blamed.
	Ranges []StoppedRange `json:"ranges,omitempty"`
	// Unjudged are ranges beside a regression not yet judged: they may
	// hold another one.
	Unjudged []StoppedRange `json:"unjudged,omitempty"`
	Verdicts []Verdict      `json:"verdicts"`
}

// MaxTime and Spent are the bound and the time spent.
func (s Stopped) MaxTime() time.Duration {
	return time.Duration(s.MaxTimeSeconds * float64(time.Second))
}
func (s Stopped) Spent() time.Duration { return time.Duration(s.SpentSeconds * float64(time.Second)) }

// StoppedRange is a range of commits, First to Last, after Parent.
type StoppedRange struct {
	Parent     Commit `json:"parent"`
	First      Commit `json:"first"`
	Last       Commit `json:"last"`
	Candidates int    `json:"candidates"`
	Note       string `json:"note,omitempty"`
}

// Verdict is one verdict a bisection made: Bad against Good, in the
// search or, when Check is set, a check with fresh samples.
type Verdict struct {
	Good    Commit `json:"good"`
	Bad     Commit `json:"bad"`
	Check   bool   `json:"check,omitempty"`
	Verdict string `json:"verdict"`
	// Change is "+12.3% [+8.1%, +16.0%], p=0.0001, n=15+15".
	Change string `json:"change,omitempty"`
}

// stoppedOf is s's Stopped, nil unless it stopped at its time bound.
func stoppedOf(s *bisect.State, commit func(int) Commit) *Stopped {
	if s.Outcome != bisect.OutcomeTimeBound {
		return nil
	}
	st := &Stopped{MaxTimeSeconds: s.MaxTime.Seconds(), SpentSeconds: s.Spent.Round(time.Second).Seconds(), Phase: string(s.StoppedIn)}
	rng := func(r bisect.Range) StoppedRange {
		n := 0
		for i := r.Parent + 1; i <= r.Last; i++ {
			if !s.Commits[i].NoCompile {
				n++
			}
		}
		return StoppedRange{Parent: commit(r.Parent), First: commit(r.First), Last: commit(r.Last), Candidates: n, Note: r.Note}
	}
	for _, r := range s.Unresolved {
		st.Ranges = append(st.Ranges, rng(r))
	}
	for _, r := range s.Unjudged {
		st.Unjudged = append(st.Unjudged, rng(r))
	}
	for _, j := range s.Judgements() {
		v := Verdict{Good: commit(j.Left), Bad: commit(j.Right), Check: j.Check, Verdict: string(j.Verdict)}
		if j.Result != nil {
			v.Change = j.Result.String()
		}
		st.Verdicts = append(st.Verdicts, v)
	}
	return st
}
