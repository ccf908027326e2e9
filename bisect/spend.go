package bisect

import (
	"fmt"
	"strings"
)

// Spend says where a bisection's samples went: by phase (the endpoints'
// comparison, the search's comparisons, the checks before blame) and by
// the verdict of the comparison each sample was taken for. Every sample
// counts once, for the comparison that asked for it.
type Spend struct {
	Endpoints int `json:"endpoints"`
	Search    int `json:"search"`
	Checks    int `json:"checks"`
	// Curve counts, in a bisection of several points, the samples that
	// measured culprits at the points where they were not found (see
	// Curve); they are in no verdict below.
	Curve int `json:"curve,omitempty"`

	Regression int `json:"regression"`
	Same       int `json:"same"`
	// Smaller counts samples of older halves shown smaller than their
	// parent's regression (VerdictSmaller).
	Smaller     int `json:"smaller,omitempty"`
	Improvement int `json:"improvement,omitempty"`
	// Undecided counts samples of comparisons that ended inconclusive,
	// became unmeasurable, or are still running.
	Undecided int `json:"undecided"`

	// Unsplit counts samples a state saved before samples were counted per
	// comparison (Pair.Taken) cannot attribute; they are in none of the
	// fields above.
	Unsplit int `json:"unsplit,omitempty"`
}

// Total is the number of samples Spend accounts for, Unsplit included.
func (sp Spend) Total() int { return sp.Endpoints + sp.Search + sp.Checks + sp.Curve + sp.Unsplit }

// Spend splits the samples taken so far by phase and by verdict.
func (s *State) Spend() Spend {
	if s.Curve != nil {
		return s.curveSpend()
	}
	var sp Spend
	byVerdict := func(v Verdict, n int) {
		switch v {
		case VerdictRegression:
			sp.Regression += n
		case VerdictSame:
			sp.Same += n
		case VerdictSmaller:
			sp.Smaller += n
		case VerdictImprovement:
			sp.Improvement += n
		default:
			sp.Undecided += n
		}
	}
	for k, p := range s.Pairs {
		if k == 0 {
			sp.Endpoints += p.Taken
		} else {
			sp.Search += p.Taken
		}
		byVerdict(p.Verdict, p.Taken)
	}
	for _, ch := range s.Checks {
		n := len(ch.A) + len(ch.B)
		if ch.Curve {
			sp.Curve += n
			continue
		}
		sp.Checks += n
		byVerdict(ch.Verdict, n)
	}
	for _, mv := range s.Moves { // checks restarted on another machine (Arrive)
		for i, cs := range mv.CheckSamples {
			n := len(cs.A) + len(cs.B)
			sp.Checks += n
			byVerdict(s.Checks[mv.Checks[i]].Verdict, n)
		}
	}
	sp.Unsplit = max(0, s.SamplesTaken-sp.Total())
	return sp
}

// String is "endpoints 40, search 300, checks 72; regression 120, same
// 200, smaller 60, undecided 32": the one text of the split, in the
// bisection's log (after the total), the reports' footers and the CLI.
// Smaller counts samples of halves shown smaller than the regression they
// were split from; improvement, when any, and the samples a state saved
// before they were counted per comparison could not attribute ("N not
// attributed") follow.
func (sp Spend) String() string {
	out := fmt.Sprintf("endpoints %d, search %d, checks %d", sp.Endpoints, sp.Search, sp.Checks)
	if sp.Curve > 0 {
		out += fmt.Sprintf(", curve %d", sp.Curve)
	}
	out += fmt.Sprintf("; regression %d, same %d", sp.Regression, sp.Same)
	if sp.Smaller > 0 {
		out += fmt.Sprintf(", smaller %d", sp.Smaller)
	}
	if sp.Improvement > 0 {
		out += fmt.Sprintf(", improvement %d", sp.Improvement)
	}
	out += fmt.Sprintf(", undecided %d", sp.Undecided)
	if sp.Unsplit > 0 {
		out += fmt.Sprintf("; %d not attributed", sp.Unsplit)
	}
	return out
}

// SpendMean is the mean Spend of many simulated bisections.
type SpendMean struct {
	Endpoints, Search, Checks                         float64
	Regression, Same, Smaller, Improvement, Undecided float64
}

func (m *SpendMean) add(sp Spend) {
	m.Endpoints += float64(sp.Endpoints)
	m.Search += float64(sp.Search)
	m.Checks += float64(sp.Checks)
	m.Regression += float64(sp.Regression)
	m.Same += float64(sp.Same)
	m.Smaller += float64(sp.Smaller)
	m.Improvement += float64(sp.Improvement)
	m.Undecided += float64(sp.Undecided)
}

func (m *SpendMean) scale(f float64) {
	for _, x := range []*float64{&m.Endpoints, &m.Search, &m.Checks, &m.Regression, &m.Same, &m.Smaller, &m.Improvement, &m.Undecided} {
		*x *= f
	}
}

// FormatSpendTable renders where the samples of rows went, as a Markdown
// table: means per bisection by phase and by the verdict of the
// comparison each sample was taken for.
func FormatSpendTable(rows []SimRow) string {
	var b strings.Builder
	b.WriteString("| commits | culprits | effect | noise | drift | samples | endpoints | search | checks | regression | same | smaller | undecided |\n")
	b.WriteString("|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		c, m := r.Config, r.Spend
		eff := fmt.Sprintf("%.0f%%", 100*c.Effect)
		if c.Effect == 0 {
			eff = fmt.Sprintf("%.0f–%.0f%%", 100*c.MinEffect, 100*c.MaxEffect)
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s %.0f%% | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n",
			c.Commits, c.Culprits, eff, c.Noise, 100*c.Sigma, c.Drift, r.Samples,
			m.Endpoints, m.Search, m.Checks, m.Regression, m.Same, m.Smaller, m.Undecided+m.Improvement)
	}
	return b.String()
}
