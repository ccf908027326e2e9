package bisect

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// ScenarioName is the scenario file's name without directory and
// extension, which is also a scenario's default name.
func (s *State) ScenarioName() string {
	b := filepath.Base(s.Inputs.Scenario)
	return strings.TrimSuffix(b, filepath.Ext(b))
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
