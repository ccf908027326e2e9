package bisect

import "github.com/pgbisect/pgbisect/bench/stats"

// pairThresholds are the thresholds of pair k's comparison: the search's
// (Inputs.Thresholds), but for the endpoints under Plan 2, which are
// judged a regression only at alpha Inputs.WrongBlame (when that is
// smaller). A wrong "regression" there starts a whole search, hundreds of
// samples that can end in nothing but unconfirmed suspects; a wrong one
// inside the search costs one branch. The equivalence ("same") side of
// the comparison is ruled by Confidence, not Alpha, and is unchanged.
func (s *State) pairThresholds(k int) stats.Thresholds {
	th := s.Inputs.Thresholds
	if k == 0 && s.Plan >= 2 && s.Inputs.WrongBlame > 0 {
		th.Alpha = min(th.Alpha, s.Inputs.WrongBlame)
	}
	return th
}
