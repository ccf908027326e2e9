package notify

import (
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bench/profile"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// profiledCulprits is the two-culprit COPY regression with "where the
// time went": the first culprit profiled with 5 runs a side (its flame
// graph next to the report), the second without perf on the machine.
func profiledCulprits() *finding.Finding {
	f := twoCulprits()
	f.ID = "20260130T020000Z-copy-single-c24e9ef330-profiled"
	f.Culprits[0].Profile = &finding.Profile{ParentRuns: 5, CulpritRuns: 5, MinP: 0.0079, FlameGraph: "flame-9f8377f7a2.svg",
		Self: []finding.FunctionShare{
			{Function: "AllocSetAlloc", Parent: 0.021, Culprit: 0.046, Change: 0.025, P: 0.0079},
			{Function: "AllocSetFree", Parent: 0.008, Culprit: 0.027, Change: 0.019, P: 0.0079},
			{Function: "NextCopyFrom", Parent: 0.031, Culprit: 0.036, Change: 0.005, P: 0.095},
		},
		Inclusive: []finding.FunctionShare{
			{Function: "NextCopyFrom", Parent: 0.412, Culprit: 0.468, Change: 0.056, P: 0.0079},
			{Function: "palloc", Parent: 0.024, Culprit: 0.051, Change: 0.027, P: 0.0079},
		}}
	f.Culprits[1].Profile = &finding.Profile{Warnings: []string{
		"no CPU profile: perf is not installed (Debian: apt-get install linux-perf); no further profiled runs were taken",
		"no profile comparison: a side has no profiled run with samples"}}
	return f
}

// TestFromProfile keeps the self figures in Self and the inclusive ones
// in Inclusive, and the run counts and warnings.
func TestFromProfile(t *testing.T) {
	c := profile.Change{Function: "hash_bytes", Base: profile.Share{Self: 0.01, Inclusive: 0.02}, Culprit: profile.Share{Self: 0.04, Inclusive: 0.09},
		Self: 0.03, Inclusive: 0.07, PSelf: 0.029, PInclusive: 0.05}
	p := finding.FromProfile("clients=1", profile.Summary{BaseRuns: 4, CulpritRuns: 3, MinP: 0.057, Self: []profile.Change{c}, Inclusive: []profile.Change{c},
		Warnings: []string{"few runs"}}, true)
	want := finding.FunctionShare{Function: "hash_bytes", Parent: 0.01, Culprit: 0.04, Change: 0.03, P: 0.029}
	if len(p.Self) != 1 || p.Self[0] != want {
		t.Errorf("self: %+v, want %+v", p.Self, want)
	}
	want = finding.FunctionShare{Function: "hash_bytes", Parent: 0.02, Culprit: 0.09, Change: 0.07, P: 0.05}
	if len(p.Inclusive) != 1 || p.Inclusive[0] != want {
		t.Errorf("inclusive: %+v, want %+v", p.Inclusive, want)
	}
	if p.Point != "clients=1" || p.ParentRuns != 4 || p.CulpritRuns != 3 || p.MinP != 0.057 || !p.FramePointers || len(p.Warnings) != 1 {
		t.Errorf("FromProfile = %+v", p)
	}
}

// TestProfileSectionOnlyWhenProfiled: a finding without profiles has no
// "Where the time went"; an issue body without a report URL names the
// flame graph instead of linking it.
func TestProfileSectionOnlyWhenProfiled(t *testing.T) {
	if strings.Contains(Markdown(twoCulprits(), Options{}), "Where the time went") {
		t.Errorf("a finding without profiles has a profile section")
	}
	body := Markdown(profiledCulprits(), Options{Marker: "<!-- pgbisect -->"})
	if !strings.Contains(body, "next to the report of finding") || strings.Contains(body, "](flame-") {
		t.Errorf("issue body without a report URL links the flame graph:\n%s", body)
	}
	body = Markdown(profiledCulprits(), Options{Marker: "<!-- pgbisect -->", PlotURL: "https://bench.example.org/reports/x/"})
	if !strings.Contains(body, "(https://bench.example.org/reports/x/flame-9f8377f7a2.svg)") {
		t.Errorf("issue body with a report URL does not link the flame graph:\n%s", body)
	}
}
