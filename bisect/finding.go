package bisect

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/notify"
)

// Report is what a finding needs beyond the State: where the numbers come
// from and how to reproduce them.
type Report struct {
	Branch    string
	Env       notify.Environment
	Build     notify.BuildInfo
	Settings  map[string]string
	Reproduce string
	// CommitURL, when set, returns a commit's web page.
	CommitURL func(hash string) string
}

// FindingID is the ID of the finding of a bisection: the same for every
// run and resume of it, so its report directory does not move.
func (s *State) FindingID() string {
	return notify.NewID(s.Started, s.scenarioName(), s.Commits[len(s.Commits)-1].Hash) + "-" + s.ID
}

// scenarioName is the scenario file's name without directory and
// extension, which is also a scenario's default name.
func (s *State) scenarioName() string {
	b := filepath.Base(s.Inputs.Scenario)
	return strings.TrimSuffix(b, filepath.Ext(b))
}

// Finding turns a finished bisection into the report model of package
// notify: culprits with their checks' evidence, the endpoint comparison,
// and the bisection log of every commit measured or skipped.
func (s *State) Finding(r Report) *notify.Finding {
	in := s.Inputs
	dir := notify.LowerIsBetter
	if in.Direction == stats.HigherIsBetter {
		dir = notify.HigherIsBetter
	}
	commit := func(i int) notify.Commit {
		c := s.Commits[i]
		nc := notify.Commit{Hash: c.Hash, Subject: c.Subject, Author: c.Author, Date: c.Date}
		if c.AuthorEmail != "" {
			nc.Author = fmt.Sprintf("%s <%s>", c.Author, c.AuthorEmail)
		}
		if r.CommitURL != nil {
			nc.URL = r.CommitURL(c.Hash)
		}
		return nc
	}
	cmp := func(res *Result, verdict Verdict) notify.Comparison {
		c := notify.Comparison{Metric: in.Metric, Unit: in.Unit, Direction: dir, Point: in.Point,
			Confidence: in.Thresholds.Confidence, Verdict: string(verdict)}
		if res != nil {
			c.Good = notify.Side{Median: res.MedianA, RelStddev: res.RelA, N: res.NA}
			c.Bad = notify.Side{Median: res.MedianB, RelStddev: res.RelB, N: res.NB}
			c.Ratio, c.RatioLow, c.RatioHigh, c.P = res.Ratio, res.Lo, res.Hi, res.P
		}
		return c
	}
	last := len(s.Commits) - 1
	f := &notify.Finding{
		ID: s.FindingID(), Branch: r.Branch, Scenario: s.scenarioName(),
		Metric: in.Metric, Unit: in.Unit, Direction: dir, Point: in.Point,
		Good: commit(0), Bad: commit(last),
		Env: r.Env, Build: r.Build, Settings: r.Settings, Reproduce: r.Reproduce,
		Started: s.Started, Finished: s.Updated, Builds: s.BuildsDone, Samples: s.SamplesTaken,
	}
	sp := s.Spend()
	f.SamplesBy = &notify.SampleSpend{Endpoints: sp.Endpoints, Search: sp.Search, Checks: sp.Checks, Regression: sp.Regression,
		Same: sp.Same, Smaller: sp.Smaller, Undecided: sp.Undecided + sp.Improvement, Unsplit: sp.Unsplit}
	switch s.Outcome {
	case OutcomeFound:
		f.Kind = notify.Regression
	case OutcomeImprovement:
		f.Kind = notify.Improvement
	case OutcomeNoRegression:
		f.Kind = notify.NoRegression
	case OutcomeBroken:
		f.Kind = notify.BuildFailure
	default:
		f.Kind = notify.Inconclusive
	}
	if p := s.Pairs[0]; p.Result != nil {
		f.Comparisons = []notify.Comparison{cmp(p.Result, p.Verdict)}
	}
	for _, c := range s.Culprits {
		nc := notify.Culprit{Commit: commit(c.Last), Parent: commit(c.Parent), Verified: true,
			Comparisons: []notify.Comparison{cmp(c.Result, VerdictRegression)}}
		if len(c.Candidates) > 1 {
			for _, i := range c.Candidates {
				nc.Range = append(nc.Range, commit(i))
			}
		}
		f.Culprits = append(f.Culprits, nc)
	}
	f.Log = s.log(commit)
	if in.GivenGood != "" {
		f.Warnings = append(f.Warnings, MergeBaseNote(shortHash(in.GivenGood), s.Commits[0].Short()))
	}
	f.Warnings = append(f.Warnings, s.Summary)
	for _, u := range s.Unresolved {
		f.Warnings = append(f.Warnings, fmt.Sprintf("unresolved range %s: %s", s.rangeName(u), u.Note))
	}
	for _, u := range s.Unconfirmed {
		f.Warnings = append(f.Warnings, fmt.Sprintf("suspect %s not blamed: %s", s.rangeName(u), u.Note))
	}
	for _, res := range []*Result{s.Pairs[0].Result} {
		if res != nil {
			f.Warnings = append(f.Warnings, res.Warnings...)
		}
	}
	return f
}

// log is the bisection log: every measured commit and every commit found
// not to build, in history order, with its verdict relative to the
// culprits found.
func (s *State) log(commit func(int) notify.Commit) []notify.Step {
	firstBad := len(s.Commits) - 1
	if len(s.Culprits) > 0 {
		firstBad = len(s.Commits)
		for _, c := range s.Culprits {
			firstBad = min(firstBad, c.Candidates[0])
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
		if s.skipped(i) && !c.NoCompile && !slices.Contains(idx, i) {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	var steps []notify.Step
	for _, i := range idx {
		c := s.Commits[i]
		st := notify.Step{Commit: commit(i), Order: i}
		if b := s.Builds[c.Key]; b != nil && b.Broken {
			st.Verdict, st.Note = notify.StepUnbuildable, b.Reason
			steps = append(steps, st)
			continue
		}
		if b := s.Builds[c.Key]; b != nil && b.Unmeasurable {
			st.Verdict, st.Note, st.ServerLog = notify.StepUnmeasurable, b.Reason, b.ServerLog
			steps = append(steps, st)
			continue
		}
		xs := s.Samples[c.Key]
		st.Samples, st.N, st.Median = slices.Clone(xs), len(xs), stats.Summarize(xs).Median
		switch {
		case i == 0 || (i < firstBad && len(s.Culprits) > 0):
			st.Verdict = notify.StepGood
		case s.Outcome == OutcomeFound || i == len(s.Commits)-1:
			st.Verdict = notify.StepBad
		default:
			st.Verdict = notify.StepInconclusive
		}
		for _, ch := range s.Checks {
			if ch.Right == i {
				st.Note = fmt.Sprintf("re-verified against %s with fresh samples: %s %s", s.Commits[ch.Left].Short(), ch.Verdict, ch.Result)
			}
		}
		steps = append(steps, st)
	}
	return steps
}

// better says which way the bisection's metric is better: "lower is
// better" or "higher is better".
func (s *State) better() string {
	if s.Inputs.Direction == stats.HigherIsBetter {
		return "higher is better"
	}
	return "lower is better"
}

// change is the signed change of the metric from r's good side to its bad
// side: "tps -22.0%". A regression of a higher-is-better metric is
// negative.
func (s *State) change(r *Result) string {
	if r == nil || r.Ratio == 0 {
		return s.Inputs.Metric + " ?%"
	}
	return fmt.Sprintf("%s %+.1f%%", s.Inputs.Metric, 100*(r.Ratio-1))
}

// Effect says how a comparison came out, with the metric and which way is
// better: "tps -22.0% [-25.1%, -19.0%], higher is better, p=0.0001,
// n=15+15".
func (s *State) Effect(r *Result) string {
	if r == nil {
		return "no comparison"
	}
	return fmt.Sprintf("%s %+.1f%% [%+.1f%%, %+.1f%%], %s, p=%.2g, n=%d+%d", s.Inputs.Metric,
		100*(r.Ratio-1), 100*(r.Lo-1), 100*(r.Hi-1), s.better(), r.P, r.NA, r.NB)
}

// MergeBaseNote says that a bisection runs from the merge base of the good
// commit given and the bad one, because the good one is on another branch.
func MergeBaseNote(given, base string) string {
	return fmt.Sprintf("good %s is not an ancestor of bad (the two are on diverging branches): bisecting from their merge base %s instead", given, base)
}

func shortHash(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}
