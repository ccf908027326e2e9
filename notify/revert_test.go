package notify

import (
	"math"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// TestRevertPhrases covers the wording of the checks the golden fixture
// does not have: one that is not shown to recover, one without an
// interval, a range that is not checked, an improvement; and that a
// non-finite fraction still saves.
func TestRevertPhrases(t *testing.T) {
	f := twoCulprits()
	back := cmp("elapsed", "s", stats.LowerIsBetter, "", 17.299, 16.8, 0.011, 10, 0.01, "improvement")
	f.Reverts = []finding.RevertCheck{
		{Culprits: []finding.Commit{c9f}, Comparison: &back, Recovered: 0.31, RecoveredLow: 0.05, RecoveredHigh: 0.57, HasInterval: true, Confidence: 0.95},
		{Culprits: []finding.Commit{cFaff}, Recovered: math.NaN(), Warnings: []string{"too few runs for an interval of the recovered fraction"}},
		{Culprits: []finding.Commit{cRange3}, Skipped: "a range of 3 candidates next to commits that do not build: reverting one would not tell which it was"},
	}
	text := Text(f, Options{})
	for _, want := range []string{
		"Reverting 9f8377f7a2 on top of c24e9ef330 recovers only 31% of the regression (95% CI 5% to 57%): not shown to recover it",
		"recovers only ?% of the regression (no interval)",
		"too few runs for an interval of the recovered fraction.",
		"Reverting " + cRange3.Hash[:10] + " on top of c24e9ef330: not checked: a range of 3 candidates",
	} {
		if !strings.Contains(strings.Join(strings.Fields(text), " "), want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	js, err := finding.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	back2, err := finding.Unmarshal(js)
	if err != nil || len(back2.Reverts) != 3 || back2.Reverts[0].Comparison == nil || back2.Reverts[0].Comparison.Good.Median != 17.299 {
		t.Errorf("reverts do not survive JSON: %v %+v", err, back2)
	}
	imp := improvement()
	imp.Reverts = []finding.RevertCheck{{Culprits: []finding.Commit{imp.Culprits[0].Commit}, Recovered: 1, HasInterval: true, RecoveredLow: 0.9, RecoveredHigh: 1.1, Recovers: true}}
	if s := Markdown(imp, Options{}); !strings.Contains(s, "of the improvement") {
		t.Errorf("an improvement's revert check does not speak of the improvement:\n%s", s)
	}
}
