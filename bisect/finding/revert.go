package finding

import "github.com/pgbisect/pgbisect/bench/stats"

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
	// Base is the commit reverted on top of when it is not Bad: there
	// the revert conflicted (Conflict says where), and Base is the latest
	// first-parent commit on the way from the culprit to Bad where it
	// merges, BaseBehind commits before Bad (build.Repo.RevertBase). The
	// check then measures Base against Base with the revert.
	Base       *Commit `json:"base,omitempty"`
	BaseBehind int     `json:"base_behind,omitempty"`
	Conflict   string  `json:"conflict,omitempty"`
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
		r.Recovered, r.RecoveredLow, r.RecoveredHigh = stats.Finite(r.Recovered), stats.Finite(r.RecoveredLow), stats.Finite(r.RecoveredHigh)
		out[i] = r
	}
	return out
}
