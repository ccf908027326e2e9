package notify

import (
	"fmt"
	"math"
	"strings"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// revertSection is the "Revert check" section; ok is false without checks.
func revertSection(f *finding.Finding, st style) (section, bool) {
	if len(f.Reverts) == 0 {
		return section{}, false
	}
	change := "regression"
	if f.Kind == finding.Improvement {
		change = "improvement"
	}
	s := section{heading: "Revert check"}
	s.blocks = append(s.blocks, para{fmt.Sprintf("Each culprit's change (its diff against its parent) was reverted on top of %s, "+
		"and that build measured against %s in %s, interleaved with the culprit and its parent (for all culprits, the endpoints). A revert recovers the %s when the lower bound of the recovered fraction's "+
		"%s confidence interval is at least 50%%. Where later commits changed a culprit's lines and its revert conflicts on %s, it is reverted on top of the latest commit "+
		"where it merges and measured against that commit. A revert that does not apply changes nothing above.",
		st.code(finding.KeyHash(f.Bad)), st.code(finding.KeyHash(f.Bad)), st.esc(f.Metric), change, confidence(revertConfidence(f)), st.code(finding.KeyHash(f.Bad)))})
	var items []string
	for _, r := range f.Reverts {
		items = append(items, revertText(r, f, change, st))
	}
	s.blocks = append(s.blocks, list{items: items})
	return s, true
}

// revertText is one check in words: "Reverting `9f8377f7a2` on top of
// `c24e9ef330` recovers 97% of the regression (95% CI 81% to 113%)".
func revertText(r finding.RevertCheck, f *finding.Finding, change string, st style) string {
	what := "reverting "
	if r.All {
		what = fmt.Sprintf("reverting all %d culprits ", len(r.Culprits))
	} else if len(r.Culprits) > 0 {
		what += commitRef(r.Culprits[0], st) + " "
	}
	if r.Base != nil {
		what += fmt.Sprintf("on top of %s (%s before %s: on top of %s the revert conflicts, %s)", st.code(finding.KeyHash(*r.Base)), commitsBefore(r.BaseBehind),
			st.code(finding.KeyHash(f.Bad)), st.code(finding.KeyHash(f.Bad)), st.esc(conflictWhere(r.Conflict)))
	} else {
		what += "on top of " + st.code(finding.KeyHash(f.Bad))
	}
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

func commitsBefore(n int) string {
	if n == 1 {
		return "1 commit"
	}
	return fmt.Sprintf("%d commits", n)
}

// conflictWhere shortens build's conflict error to its file and lines:
// "in src/backend/commands/copyfromparse.c, lines 1685-1710".
func conflictWhere(e string) string {
	_, rest, ok := strings.Cut(e, " does not apply: ")
	if !ok {
		return e
	}
	file, why, _ := strings.Cut(rest, ": ")
	if _, lines, ok := strings.Cut(why, "(lines "); ok {
		lines, _, _ = strings.Cut(lines, " of ")
		return "in " + file + ", lines " + lines
	}
	return "in " + file
}

// fraction formats a recovered fraction: 0.973 -> "97%".
func fraction(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "?%"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

func revertConfidence(f *finding.Finding) float64 {
	for _, r := range f.Reverts {
		if r.Confidence > 0 {
			return r.Confidence
		}
	}
	return 0.95
}
