package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// bisectPrintStopped prints the partial answer of a bisection stopped at
// its time bound: the ranges it narrowed the regression to, those beside
// it not yet judged, every verdict it made, and how to continue it.
func bisectPrintStopped(w io.Writer, id string, st *finding.Stopped) {
	name := func(r finding.StoppedRange) string {
		if r.First.Hash == r.Last.Hash {
			return r.First.ShortHash()
		}
		return r.First.ShortHash() + ".." + r.Last.ShortHash()
	}
	for _, r := range st.Ranges {
		fmt.Fprintf(w, "\nthe regression lies in %s (%s after %s): %s\n", name(r), candidates(r.Candidates), r.Parent.ShortHash(), r.Note)
	}
	for _, r := range st.Unjudged {
		fmt.Fprintf(w, "\nnot yet judged: %s (%s): %s\n", name(r), candidates(r.Candidates), r.Note)
	}
	fmt.Fprintf(w, "\nverdicts made before the time bound (%d):\n", len(st.Verdicts))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range st.Verdicts {
		what := "search"
		if v.Check {
			what = "check"
		}
		fmt.Fprintf(tw, "  %s..%s\t%s\t%s\t%s\n", v.Good.ShortHash(), v.Bad.ShortHash(), what, v.Verdict, v.Change)
	}
	tw.Flush()
	more := 2 * st.MaxTime()
	fmt.Fprintf(w, "\nstopped in the %s at the time bound of %s (%s spent); to continue: pgbisect bisect --resume %s --max-time %s\n",
		st.Phase, st.MaxTime(), st.Spent().Round(time.Second), id, more)
}

// candidates is "1 candidate", "2 candidates".
func candidates(n int) string {
	if n == 1 {
		return "1 candidate"
	}
	return fmt.Sprintf("%d candidates", n)
}
