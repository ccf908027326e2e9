package notify

import (
	"fmt"
	"math"
	"strings"
)

// RevertCheck is the proof of a culprit by backing it out: Bad with the
// culprit's change undone (its parent→culprit diff applied in reverse),
// built and measured against Bad. With several culprits there is also one
// check with all of them reverted. A check that could not be made says why
// in Skipped; it never changes the finding's verdict.
type RevertCheck struct {
	// Culprits are the commits reverted: one culprit, or all of them.
	Culprits []Commit `json:"culprits"`
	// All marks the check with every culprit reverted.
	All bool `json:"all,omitempty"`
	// Build is the synthetic commit that was built (Bad with the reverts,
	// kept under refs/pgbisect/patched/); empty when the revert did not
	// apply.
	Build string `json:"build,omitempty"`
	// Comparison is Bad (the good side) against the reverted build (the
	// bad side) in the finding's metric and point.
	Comparison *Comparison `json:"comparison,omitempty"`
	// Regression is the change being undone, measured again in the same
	// interleaved runs: the culprit against its parent, or for all
	// culprits the bad endpoint against the good one.
	Regression *Comparison `json:"regression,omitempty"`
	// Recovered is the fraction of the regression the revert undoes (1 =
	// all of it; bench/stats.Recovered), with its interval at Confidence;
	// RecoveredLow and RecoveredHigh are 0 when there is none
	// (HasInterval false).
	Recovered     float64 `json:"recovered"`
	RecoveredLow  float64 `json:"recovered_low"`
	RecoveredHigh float64 `json:"recovered_high"`
	HasInterval   bool    `json:"has_interval"`
	Confidence    float64 `json:"confidence,omitempty"`
	// Recovers is true when RecoveredLow is at least 0.5.
	Recovers bool `json:"recovers"`
	// Skipped says why there is no measurement: the revert does not apply
	// (with the file and hunk), the culprit is a range of candidates, the
	// reverted tree does not build.
	Skipped  string   `json:"skipped,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// revertSection is the "Revert check" section; ok is false without checks.
func revertSection(f *Finding, st style) (section, bool) {
	if len(f.Reverts) == 0 {
		return section{}, false
	}
	change := "regression"
	if f.Kind == Improvement {
		change = "improvement"
	}
	s := section{heading: "Revert check"}
	s.blocks = append(s.blocks, para{fmt.Sprintf("Each culprit's change (its diff against its parent) was reverted on top of %s, "+
		"and that build measured against %s in %s, interleaved with the culprit and its parent (for all culprits, the endpoints). A revert recovers the %s when the lower bound of the recovered fraction's "+
		"%s confidence interval is at least 50%%. A revert that does not apply changes nothing above.",
		st.code(keyHash(f.Bad)), st.code(keyHash(f.Bad)), st.esc(f.Metric), change, confidence(revertConfidence(f)))})
	var items []string
	for _, r := range f.Reverts {
		items = append(items, revertText(r, f, change, st))
	}
	s.blocks = append(s.blocks, list{items: items})
	return s, true
}

// revertText is one check in words: "Reverting `9f8377f7a2` on top of
// `c24e9ef330` recovers 97% of the regression (95% CI 81% to 113%)".
func revertText(r RevertCheck, f *Finding, change string, st style) string {
	what := "reverting "
	if r.All {
		what = fmt.Sprintf("reverting all %d culprits ", len(r.Culprits))
	} else if len(r.Culprits) > 0 {
		what += commitRef(r.Culprits[0], st) + " "
	}
	what += "on top of " + st.code(keyHash(f.Bad))
	what = strings.ToUpper(what[:1]) + what[1:]
	if r.Skipped != "" {
		return fmt.Sprintf("%s: not checked: %s.", what, st.esc(strings.TrimSuffix(r.Skipped, ".")))
	}
	verb := "recovers"
	if !r.Recovers {
		verb = "recovers only"
		if r.Recovered >= 0.5 {
			verb = "recovers" // the estimate is high, its interval too wide to say so
		}
	}
	s := fmt.Sprintf("%s %s %s of the %s", what, verb, st.bold(fraction(r.Recovered)), change)
	if r.HasInterval {
		s += fmt.Sprintf(" (%s CI %s to %s)", confidence(r.Confidence), fraction(r.RecoveredLow), fraction(r.RecoveredHigh))
	} else {
		s += " (no interval)"
	}
	if r.Recovers {
		s += ": it accounts for the " + change
	} else {
		s += fmt.Sprintf(": not shown to recover it (the rule needs the interval's lower bound at 50%% or more)")
	}
	if c := r.Comparison; c != nil {
		s += fmt.Sprintf(". %s %s → %s, %s, n = %d+%d", st.esc(c.Metric), value(c.Good.Median, c.Unit), value(c.Bad.Median, c.Unit),
			pct(c.Ratio), c.Good.N, c.Bad.N)
	}
	if c := r.Regression; c != nil {
		s += fmt.Sprintf("; the %s, measured again in the same runs: %s → %s, %s", change, value(c.Good.Median, c.Unit), value(c.Bad.Median, c.Unit), pct(c.Ratio))
	}
	s += "."
	for _, w := range r.Warnings {
		s += " " + st.esc(strings.TrimSuffix(w, ".")) + "."
	}
	return s
}

// fraction formats a recovered fraction: 0.973 -> "97%".
func fraction(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "?%"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

func revertConfidence(f *Finding) float64 {
	for _, r := range f.Reverts {
		if r.Confidence > 0 {
			return r.Confidence
		}
	}
	return 0.95
}

// finiteReverts is finiteCopy's part for the revert checks.
func finiteReverts(rs []RevertCheck, cmps func([]Comparison) []Comparison) []RevertCheck {
	if rs == nil {
		return nil
	}
	out := make([]RevertCheck, len(rs))
	for i, r := range rs {
		if r.Comparison != nil {
			c := cmps([]Comparison{*r.Comparison})[0]
			r.Comparison = &c
		}
		if r.Regression != nil {
			c := cmps([]Comparison{*r.Regression})[0]
			r.Regression = &c
		}
		if !r.HasInterval {
			r.RecoveredLow, r.RecoveredHigh = 0, 0
		}
		r.Recovered, r.RecoveredLow, r.RecoveredHigh = finite(r.Recovered), finite(r.RecoveredLow), finite(r.RecoveredHigh)
		out[i] = r
	}
	return out
}
