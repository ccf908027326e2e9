package notify

import (
	"fmt"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// profileSection is "Where the time went": for each culprit with a
// profile, the top growers by self and by inclusive share, the flame
// graph and the warnings.
func profileSection(f *finding.Finding, st style, o Options) (section, bool) {
	s := section{heading: "Where the time went"}
	for _, c := range f.Culprits {
		p := c.Profile
		if p == nil {
			continue
		}
		intro := fmt.Sprintf("CPU profiles of %s against its parent %s", commitRef(culpritTip(c), st), st.code(finding.KeyHash(c.Parent)))
		if p.Point != "" {
			intro += " at " + st.esc(p.Point)
		}
		if p.ParentRuns == 0 || p.CulpritRuns == 0 {
			s.blocks = append(s.blocks, para{intro + ": none could be taken."})
		} else {
			intro += fmt.Sprintf(" (perf, %d and %d runs): each function's share of the server's CPU samples, the median over runs, "+
				"and p from a rank test over the per-run shares (the smallest possible with these runs is %s). "+
				"Profiled runs are slowed by the profiler and not judged.", p.ParentRuns, p.CulpritRuns, pvalue(p.MinP))
			if !p.FramePointers {
				intro += " The builds omit frame pointers, so perf loses most callers above the function running: self shares are sound, inclusive shares miss callers (bisect --profile-frame-pointers profiles builds that keep them)."
			}
			s.blocks = append(s.blocks, para{intro})
			for _, k := range []struct {
				title string
				rows  []finding.FunctionShare
			}{{"Self time (the function itself)", p.Self}, {"Inclusive time (with its callees)", p.Inclusive}} {
				if len(k.rows) == 0 {
					s.blocks = append(s.blocks, para{k.title + ": no function's share grew."})
					continue
				}
				s.blocks = append(s.blocks, para{k.title + ":"}, shareTable(k.rows, st))
			}
		}
		if p.FlameGraph != "" {
			if st.markdown() && (o.PlotURL != "" || o.Marker == "") {
				s.blocks = append(s.blocks, para{fmt.Sprintf("Differential flame graph (red: share grew, blue: shrank): [%s](%s%s)", st.esc(p.FlameGraph), o.PlotURL, p.FlameGraph)})
			} else {
				s.blocks = append(s.blocks, para{fmt.Sprintf("Differential flame graph (red: share grew, blue: shrank) next to the report of finding %s: %s.", st.code(f.ID), p.FlameGraph)})
			}
		}
		if len(p.Warnings) > 0 {
			var items []string
			for _, w := range p.Warnings {
				items = append(items, st.esc(w))
			}
			s.blocks = append(s.blocks, list{items: items})
		}
	}
	return s, len(s.blocks) > 0
}

func shareTable(rows []finding.FunctionShare, st style) table {
	t := table{head: []string{"function", "parent", "culprit", "change", "p"}, right: []bool{false, true, true, true, true}}
	for _, r := range rows {
		t.rows = append(t.rows, []string{st.code(r.Function), share(r.Parent), share(r.Culprit),
			fmt.Sprintf("%+.1f pt", 100*r.Change), pvalue(r.P)})
	}
	return t
}

// share formats a fraction of the CPU: "12.3%".
func share(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }
