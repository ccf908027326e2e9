package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/internal/app"
)

// bisectPrintCurve prints the outcome of a bisection of several points:
// each point's outcome, then each culprit once with the curve before and
// after it (the metric at every point, parent against culprit).
func bisectPrintCurve(w io.Writer, out *app.BisectResult) {
	st, f := out.State, out.Finding
	fmt.Fprintf(w, "bisection %s: %s at %d points\n", st.ID, st.Outcome, len(st.Inputs.Points))
	for _, sub := range st.Searches() {
		fmt.Fprintf(w, "  %s: %s\n", sub.Inputs.Point, sub.Summary)
	}
	better := "lower is better"
	if f.Direction == stats.HigherIsBetter {
		better = "higher is better"
	}
	for i, c := range f.Culprits {
		tip := c.Commit
		fmt.Fprintf(w, "\nculprit %d: %s %s\n  author %s, %s\n", i+1, tip.ShortHash(), finding.FirstLine(tip.Subject), authorOnly(tip.Author), tip.Date.Format("2006-01-02"))
		if c.IsRange() {
			var names []string
			for _, r := range c.Range {
				names = append(names, r.ShortHash())
			}
			fmt.Fprintf(w, "  a range of %d candidates: %s\n", len(c.Range), strings.Join(names, " "))
		}
		fmt.Fprintf(w, "  the curve, %s against its parent %s (%s, %s):\n", tip.ShortHash(), c.Parent.ShortHash(), f.Metric, better)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "    point\tparent\tculprit\tchange\t95%% CI\tn\t  verdict\t\n")
		for _, cmp := range c.Comparisons {
			verdict := "culprit here (fresh samples)"
			if cmp.Curve {
				verdict = cmp.Verdict + " (not blamed here)"
			}
			fmt.Fprintf(tw, "    %s\t%.4g\t%.4g\t%+.1f%%\t[%+.1f%%, %+.1f%%]\t%d+%d\t  %s\t\n", cmp.Point, cmp.Good.Median, cmp.Bad.Median,
				100*(cmp.Ratio-1), 100*(cmp.RatioLow-1), 100*(cmp.RatioHigh-1), cmp.Good.N, cmp.Bad.N, verdict)
		}
		tw.Flush()
	}
	if sp := f.SamplesBy; sp != nil && sp.Curve > 0 {
		fmt.Fprintf(w, "\n%d samples measured the culprits at the points where they were not found\n", sp.Curve)
	}
}

// authorOnly drops the e-mail address of "Name <email>".
func authorOnly(a string) string {
	if i := strings.Index(a, " <"); i > 0 {
		return a[:i]
	}
	return a
}
