package finding

import (
	"fmt"
	"slices"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect"
)

// Report is what the finding of a bisection needs beyond its bisect.State:
// where the numbers come from and how to reproduce them.
type Report struct {
	Branch    string
	Env       Environment
	Build     BuildInfo
	Settings  map[string]string
	Reproduce string
	// CommitURL, when set, returns a commit's web page.
	CommitURL func(hash string) string
}

// BisectionID is the ID of the finding of bisection s: the same for every
// run and resume of it, so its report directory does not move, and ending in
// the bisection's own ID.
func BisectionID(s *bisect.State) string {
	return NewID(s.Started, s.ScenarioName(), s.Commits[len(s.Commits)-1].Hash) + "-" + s.ID
}

// FromBisection turns a finished bisection into a finding: culprits with
// their checks' evidence, the endpoint comparison, and the bisection log of
// every commit measured or skipped.
func FromBisection(s *bisect.State, r Report) *Finding {
	if s.Curve != nil {
		return fromCurve(s, r)
	}
	in := s.Inputs
	dir := in.Direction
	if dir == "" {
		dir = stats.LowerIsBetter
	}
	commit := func(i int) Commit { return commitOf(s, r, i) }
	cmp := func(res *bisect.Result, verdict bisect.Verdict) Comparison {
		return comparisonOf(in, dir, in.Point, res, verdict)
	}
	last := len(s.Commits) - 1
	f := &Finding{
		ID: BisectionID(s), Branch: r.Branch, Scenario: s.ScenarioName(),
		Metric: in.Metric, Unit: in.Unit, Direction: dir, Point: in.Point,
		Good: commit(0), Bad: commit(last),
		Env: r.Env, Build: r.Build, Settings: r.Settings, Reproduce: r.Reproduce,
		Started: s.Started, Finished: s.Updated, Builds: s.BuildsDone, Samples: s.SamplesTaken,
	}
	sp := s.Spend()
	f.SamplesBy = &sp
	f.Kind = kindOf(s.Outcome, len(s.Culprits))
	if p := s.Pairs[0]; p.Result != nil {
		f.Comparisons = []Comparison{cmp(p.Result, p.Verdict)}
	}
	for _, c := range s.Culprits {
		nc := Culprit{Commit: commit(c.Last), Parent: commit(c.Parent), Verified: true,
			Comparisons: []Comparison{cmp(c.Result, bisect.VerdictRegression)}}
		if len(c.Candidates) > 1 {
			for _, i := range c.Candidates {
				nc.Range = append(nc.Range, commit(i))
			}
		}
		f.Culprits = append(f.Culprits, nc)
	}
	f.Log = bisectionLog(s, commit)
	f.Stopped = stoppedOf(s, commit)
	if in.GivenGood != "" {
		f.Warnings = append(f.Warnings, bisect.MergeBaseNote(KeyHash(Commit{Hash: in.GivenGood}), s.Commits[0].Short()))
	}
	f.Warnings = append(f.Warnings, s.Summary)
	if g := s.GuideSummary(); g != "" {
		f.Warnings = append(f.Warnings, g)
	}
	if w := explainedWarning(s); w != "" {
		f.Warnings = append(f.Warnings, w)
	}
	for _, u := range s.Unresolved {
		f.Warnings = append(f.Warnings, fmt.Sprintf("unresolved range %s: %s", s.RangeName(u), u.Note))
	}
	for _, u := range s.Unconfirmed {
		f.Warnings = append(f.Warnings, fmt.Sprintf("suspect %s not blamed: %s", s.RangeName(u), u.Note))
	}
	for _, u := range s.Unjudged {
		f.Warnings = append(f.Warnings, fmt.Sprintf("range %s: %s", s.RangeName(u), u.Note))
	}
	for _, res := range []*bisect.Result{s.Pairs[0].Result} {
		if res != nil {
			f.Warnings = append(f.Warnings, res.Warnings...)
		}
	}
	return f
}

// bisectionLog is the bisection log: every measured commit and every commit
// found not to build, in history order, with its verdict relative to the
// culprits found.
func bisectionLog(s *bisect.State, commit func(int) Commit) []Step {
	firstBad := len(s.Commits) - 1
	if len(s.Culprits) > 0 {
		firstBad = len(s.Commits)
		for _, c := range s.Culprits {
			firstBad = min(firstBad, c.Candidates[0])
		}
		if s.Outcome == bisect.OutcomeTimeBound {
			// Stopped early: what lies in a range still open is not good.
			for _, r := range append(slices.Clone(s.Unresolved), s.Unjudged...) {
				firstBad = min(firstBad, r.First)
			}
		}
	}
	idx := slices.Clone(s.Points)
	for _, p := range s.Pairs { // points a merged pair took out of the search
		for _, i := range []int{p.Left, p.Right} {
			if !p.Dropped && !slices.Contains(idx, i) {
				idx = append(idx, i)
			}
		}
	}
	for i, c := range s.Commits {
		if s.Skipped(i) && !c.NoCompile && !slices.Contains(idx, i) {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	var steps []Step
	for _, i := range idx {
		c := s.Commits[i]
		st := Step{Commit: commit(i), Order: i}
		if b := s.Builds[c.Key]; b != nil && b.Broken {
			st.Verdict, st.Note = StepUnbuildable, b.Reason
			steps = append(steps, st)
			continue
		}
		if b := s.Builds[c.Key]; b != nil && b.Unmeasurable {
			st.Verdict, st.Note, st.ServerLog = StepUnmeasurable, b.Reason, b.ServerLog
			steps = append(steps, st)
			continue
		}
		xs := s.Samples[c.Key]
		st.Samples, st.N, st.Median = slices.Clone(xs), len(xs), stats.Summarize(xs).Median
		switch {
		case i == 0 || (i < firstBad && len(s.Culprits) > 0):
			st.Verdict = StepGood
		case s.Outcome == bisect.OutcomeFound || i == len(s.Commits)-1:
			st.Verdict = StepBad
		default:
			st.Verdict = StepInconclusive
		}
		for _, ch := range s.Checks {
			if ch.Right == i && !ch.Curve {
				st.Note = fmt.Sprintf("re-verified against %s with fresh samples: %s %s", s.Commits[ch.Left].Short(), ch.Verdict, ch.Result)
			}
		}
		steps = append(steps, st)
	}
	return steps
}

// commitOf is commit i of s as reports show it.
func commitOf(s *bisect.State, r Report, i int) Commit {
	c := s.Commits[i]
	nc := Commit{Hash: c.Hash, Subject: c.Subject, Author: c.Author, Date: c.Date}
	if c.AuthorEmail != "" {
		nc.Author = fmt.Sprintf("%s <%s>", c.Author, c.AuthorEmail)
	}
	if r.CommitURL != nil {
		nc.URL = r.CommitURL(c.Hash)
	}
	return nc
}

// comparisonOf is a bisection's comparison at point, as reports show it.
func comparisonOf(in bisect.Inputs, dir stats.Direction, point string, res *bisect.Result, verdict bisect.Verdict) Comparison {
	c := Comparison{Metric: in.Metric, Unit: in.Unit, Direction: dir, Point: point,
		Confidence: in.Thresholds.Confidence, Verdict: string(verdict)}
	if res != nil {
		c.Good = Side{Median: res.MedianA, RelStddev: res.RelA, N: res.NA}
		c.Bad = Side{Median: res.MedianB, RelStddev: res.RelB, N: res.NB}
		c.Ratio, c.RatioLow, c.RatioHigh, c.P = res.Ratio, res.Lo, res.Hi, res.P
	}
	return c
}

// kindOf is the kind of finding a bisection's outcome makes. A bisection
// stopped at its time bound is a partial answer: culprits confirmed before
// the bound are blamed (a regression), the rest is in Finding.Stopped.
func kindOf(o bisect.Outcome, culprits int) Kind {
	switch o {
	case bisect.OutcomeFound:
		return Regression
	case bisect.OutcomeImprovement:
		return Improvement
	case bisect.OutcomeNoRegression:
		return NoRegression
	case bisect.OutcomeBroken:
		return BuildFailure
	case bisect.OutcomeTimeBound:
		if culprits > 0 {
			return Regression
		}
	}
	return Inconclusive
}

// explainedWarning is the report's line for a search that stopped once its
// culprits explained the endpoints' change (bisect.State.Explained), with
// the evidence and the caveat; "" for one that did not.
func explainedWarning(s *bisect.State) string {
	ex := s.Explained
	if ex == nil || !ex.Confirmed || ex.Recheck == nil {
		return ""
	}
	return fmt.Sprintf("the culprits explain the endpoints' change: endpoints %s, culprits together %s (fresh samples), the rest %s, at worst %+.1f%%, under the minimum effect of %.3g%%; %d range(s) beside them not judged. Caveat: %s",
		ex.Endpoints, ex.Recheck.Combined, ex.Recheck.Remainder, 100*ex.Recheck.Bound, 100*s.Inputs.Thresholds.MinEffect, len(ex.Ranges), bisect.Caveat)
}
