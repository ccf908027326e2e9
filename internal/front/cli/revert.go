package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// revertPrint adds the revert checks to bisect's summary on stdout.
func revertPrint(w io.Writer, f *finding.Finding) {
	if len(f.Reverts) > 0 {
		fmt.Fprintln(w)
	}
	for _, r := range f.Reverts {
		var names []string
		for _, c := range r.Culprits {
			names = append(names, c.ShortHash())
		}
		what := "reverting " + strings.Join(names, " and ")
		if r.All {
			what = "reverting all culprits"
		}
		if r.Base != nil {
			n := fmt.Sprintf("%d commits", r.BaseBehind)
			if r.BaseBehind == 1 {
				n = "1 commit"
			}
			what += fmt.Sprintf(" on top of %s (%s before %s, where the revert conflicts)", r.Base.ShortHash(), n, f.Bad.ShortHash())
		} else {
			what += " on top of " + f.Bad.ShortHash()
		}
		switch {
		case r.Skipped != "":
			fmt.Fprintf(w, "revert check: %s: not checked: %s\n", what, r.Skipped)
		case !r.HasInterval:
			fmt.Fprintf(w, "revert check: %s recovers %.0f%% of the change (no interval)\n", what, 100*r.Recovered)
		default:
			verdict := "recovers it"
			if !r.Recovers {
				verdict = "not shown to recover it"
			}
			fmt.Fprintf(w, "revert check: %s recovers %.0f%% of the change (%.0f%% CI %.0f%% to %.0f%%): %s\n",
				what, 100*r.Recovered, 100*r.Confidence, 100*r.RecoveredLow, 100*r.RecoveredHigh, verdict)
		}
	}
}
