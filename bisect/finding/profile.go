package finding

import (
	"github.com/pgbisect/pgbisect/bench/profile"
	"github.com/pgbisect/pgbisect/bench/stats"
)

// Profile is "where the time went" for a culprit: CPU profiles of the
// culprit and of its parent, taken after the culprit was confirmed, and
// compared run by run. It is evidence, never a verdict: the verdict comes
// from the unprofiled samples of Comparisons.
//
// Shares are fractions (0..1) of a side's CPU samples in the server's
// processes, the median over that side's profiled runs.
type Profile struct {
	// Point is the matrix point profiled ("" without a matrix).
	Point string `json:"point,omitempty"`
	// ParentRuns and CulpritRuns count the profiled runs with samples.
	ParentRuns  int `json:"parent_runs"`
	CulpritRuns int `json:"culprit_runs"`
	// MinP is the smallest p the rank test can give with these run counts
	// (0.008 with 5 a side): no row can be surer than that.
	MinP float64 `json:"min_p"`
	// Self are the functions whose self share (running the function
	// itself) grew most, largest growth first; Inclusive those whose
	// inclusive share (with its callees) did.
	Self      []FunctionShare `json:"self,omitempty"`
	Inclusive []FunctionShare `json:"inclusive,omitempty"`
	// FramePointers is true when the builds profiled keep frame pointers;
	// without them perf's stacks stop a frame or two above the leaf, so
	// inclusive shares miss most callers (self shares are sound either
	// way; docs/profiles.md has the measurement).
	FramePointers bool `json:"frame_pointers"`
	// FlameGraph is the file name of the differential flame graph (SVG)
	// next to the report, "" when there is none.
	FlameGraph string `json:"flame_graph,omitempty"`
	// Warnings say why a profile is missing or thin (no perf, no
	// permission, too few runs to be sure of anything).
	Warnings []string `json:"warnings,omitempty"`
}

// FunctionShare is one function's share of the CPU on both sides.
type FunctionShare struct {
	Function string  `json:"function"`
	Parent   float64 `json:"parent"`
	Culprit  float64 `json:"culprit"`
	// Change is Culprit minus Parent (0.05: five points more).
	Change float64 `json:"change"`
	// P is the two-sided Mann-Whitney p-value over the per-run shares.
	P float64 `json:"p"`
}

// FromProfile converts the summary of bench/profile into a report's
// Profile.
func FromProfile(point string, s profile.Summary, framePointers bool) *Profile {
	conv := func(cs []profile.Change, inclusive bool) []FunctionShare {
		var out []FunctionShare
		for _, c := range cs {
			fs := FunctionShare{Function: c.Function, Parent: c.Base.Self, Culprit: c.Culprit.Self, Change: c.Self, P: c.PSelf}
			if inclusive {
				fs = FunctionShare{Function: c.Function, Parent: c.Base.Inclusive, Culprit: c.Culprit.Inclusive, Change: c.Inclusive, P: c.PInclusive}
			}
			fs.Parent, fs.Culprit, fs.Change, fs.P = stats.Finite(fs.Parent), stats.Finite(fs.Culprit), stats.Finite(fs.Change), stats.Finite(fs.P)
			out = append(out, fs)
		}
		return out
	}
	return &Profile{Point: point, ParentRuns: s.BaseRuns, CulpritRuns: s.CulpritRuns, MinP: stats.Finite(s.MinP),
		Self: conv(s.Self, false), Inclusive: conv(s.Inclusive, true), FramePointers: framePointers,
		Warnings: append([]string(nil), s.Warnings...)}
}
