package profile

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	mstats "github.com/aclements/go-moremath/stats"
)

// Change is one function's share of the CPU on both sides.
type Change struct {
	Function string `json:"function"`
	// Base and Culprit are the medians over each side's runs.
	Base    Share `json:"base"`
	Culprit Share `json:"culprit"`
	// Self and Inclusive are Culprit minus Base (a share of the CPU: 0.05
	// is five points more).
	Self      float64 `json:"self_delta"`
	Inclusive float64 `json:"inclusive_delta"`
	// PSelf and PInclusive are two-sided Mann-Whitney p-values over the
	// per-run shares: how surprising the difference would be if the runs
	// of both sides came from one distribution.
	PSelf      float64 `json:"p_self"`
	PInclusive float64 `json:"p_inclusive"`
}

// Diff compares the profiled runs of two builds.
type Diff struct {
	BaseRuns    int      `json:"base_runs"`
	CulpritRuns int      `json:"culprit_runs"`
	Changes     []Change `json:"changes"` // every function seen, by Self, largest growth first
	// MinP is the smallest p-value the rank test can give with these run
	// counts; with 3 runs a side it is 0.1, so nothing looks sure.
	MinP     float64  `json:"min_p"`
	Warnings []string `json:"warnings,omitempty"`
}

// Compare compares base's runs with culprit's. Runs whose profile has no
// samples are left out with a warning.
func Compare(base, culprit []Profile) Diff {
	var d Diff
	keep := func(side string, ps []Profile) []map[string]Share {
		var out []map[string]Share
		for i, p := range ps {
			if p.Samples == 0 {
				w := p.Warning
				if w == "" {
					w = "no samples"
				}
				d.Warnings = append(d.Warnings, fmt.Sprintf("%s run %d left out: %s", side, i+1, w))
				continue
			}
			out = append(out, p.Shares())
		}
		return out
	}
	b, c := keep("base", base), keep("culprit", culprit)
	d.BaseRuns, d.CulpritRuns = len(b), len(c)
	if len(b) == 0 || len(c) == 0 {
		d.Warnings = append(d.Warnings, "no profile comparison: a side has no profiled run with samples")
		return d
	}
	d.MinP = minP(len(b), len(c))
	if d.MinP > 0.05 {
		d.Warnings = append(d.Warnings, fmt.Sprintf("with %d and %d profiled runs no difference can reach p < 0.05 (the smallest possible p is %.2f)", len(b), len(c), d.MinP))
	}
	funcs := map[string]bool{}
	for _, runs := range [][]map[string]Share{b, c} {
		for _, sh := range runs {
			for f := range sh {
				funcs[f] = true
			}
		}
	}
	for f := range funcs {
		bs, bi := column(b, f)
		cs, ci := column(c, f)
		ch := Change{
			Function: f,
			Base:     Share{Self: median(bs), Inclusive: median(bi)},
			Culprit:  Share{Self: median(cs), Inclusive: median(ci)},
		}
		ch.Self = ch.Culprit.Self - ch.Base.Self
		ch.Inclusive = ch.Culprit.Inclusive - ch.Base.Inclusive
		ch.PSelf, ch.PInclusive = rankP(bs, cs), rankP(bi, ci)
		d.Changes = append(d.Changes, ch)
	}
	sort.Slice(d.Changes, func(i, j int) bool {
		x, y := d.Changes[i], d.Changes[j]
		if x.Self != y.Self {
			return x.Self > y.Self
		}
		if x.Inclusive != y.Inclusive {
			return x.Inclusive > y.Inclusive
		}
		return x.Function < y.Function
	})
	return d
}

// TopGrowers returns the n functions whose share grew most, by self
// share (inclusive: false) or inclusive share.
func (d Diff) TopGrowers(n int, inclusive bool) []Change {
	cs := append([]Change(nil), d.Changes...)
	if inclusive {
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].Inclusive > cs[j].Inclusive })
	}
	var out []Change
	for _, c := range cs {
		g := c.Self
		if inclusive {
			g = c.Inclusive
		}
		if g <= 0 || len(out) == n {
			break
		}
		out = append(out, c)
	}
	return out
}

// WriteTable prints "where the time went": the n functions whose self
// share grew most, then the n whose inclusive share did.
func (d Diff) WriteTable(w io.Writer, n int) { d.Summary(n).WriteTable(w) }

// WriteTable prints the summary's table.
func (s Summary) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "Where the time went (CPU share, median of %d base and %d culprit profiled runs; p from a rank test over runs):\n", s.BaseRuns, s.CulpritRuns)
	for _, inclusive := range []bool{false, true} {
		title, top := "Self time (the function itself)", s.Self
		if inclusive {
			title, top = "Inclusive time (with its callees)", s.Inclusive
		}
		fmt.Fprintf(w, "  %s:\n", title)
		if len(top) == 0 {
			fmt.Fprintln(w, "    no function's share grew")
			continue
		}
		width := 8
		for _, c := range top {
			width = max(width, len(c.Function))
		}
		fmt.Fprintf(w, "    %-*s  %6s  %6s  %7s  %5s\n", width, "function", "base", "culprit", "change", "p")
		for _, c := range top {
			b, cu, delta, p := c.Base.Self, c.Culprit.Self, c.Self, c.PSelf
			if inclusive {
				b, cu, delta, p = c.Base.Inclusive, c.Culprit.Inclusive, c.Inclusive, c.PInclusive
			}
			fmt.Fprintf(w, "    %-*s  %5.1f%%  %6.1f%%  %+6.1fpt  %5.3f\n", width, c.Function, 100*b, 100*cu, 100*delta, p)
		}
	}
	for _, warn := range s.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warn)
	}
}

// column is function f's self and inclusive shares over runs (0 where a
// run never saw it).
func column(runs []map[string]Share, f string) (self, incl []float64) {
	for _, sh := range runs {
		s := sh[f]
		self = append(self, s.Self)
		incl = append(incl, s.Inclusive)
	}
	return self, incl
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// rankP is the two-sided Mann-Whitney p-value, 1 when the samples are all
// equal (a function neither side ran).
func rankP(a, b []float64) float64 {
	u, err := mstats.MannWhitneyUTest(a, b, mstats.LocationDiffers)
	if err != nil || math.IsNaN(u.P) {
		return 1
	}
	return u.P
}

// minP is the smallest two-sided exact Mann-Whitney p-value for n and m
// runs: both orders of complete separation, 2 / C(n+m, n).
func minP(n, m int) float64 {
	c := 1.0
	for i := 1; i <= n; i++ {
		c = c * float64(m+i) / float64(i)
	}
	return math.Min(1, 2/c)
}

// shortName trims a long C++ or versioned symbol for display.
func shortName(f string, width int) string {
	if len(f) <= width {
		return f
	}
	return strings.TrimSpace(f[:width-1]) + "…"
}

// Summary is the "where the time went" table as data: the top growers by
// self and by inclusive share, with the comparison's run counts and
// warnings. The JSON of reports carries it.
type Summary struct {
	BaseRuns    int      `json:"base_runs"`
	CulpritRuns int      `json:"culprit_runs"`
	MinP        float64  `json:"min_p"`
	Self        []Change `json:"self"`
	Inclusive   []Change `json:"inclusive"`
	Warnings    []string `json:"warnings,omitempty"`
}

// Summary keeps the n top growers of each kind.
func (d Diff) Summary(n int) Summary {
	return Summary{BaseRuns: d.BaseRuns, CulpritRuns: d.CulpritRuns, MinP: d.MinP,
		Self: d.TopGrowers(n, false), Inclusive: d.TopGrowers(n, true), Warnings: d.Warnings}
}
