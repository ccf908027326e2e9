package app

import (
	"errors"
	"slices"
	"testing"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// TestBisectPoints: --point takes one point, a list (';' or a repeated
// variable), or all; lists come back in the scenario's order, and
// mistakes are bad requests naming the points there are.
func TestBisectPoints(t *testing.T) {
	sc, err := bench.LoadFileWith("../../configs/scenarios/copy-concurrent.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"clients=2", []string{"clients=2"}},
		{"all", []string{"clients=1", "clients=2", "clients=4"}},
		{"clients=4;clients=1", []string{"clients=1", "clients=4"}},
		{"clients=4,clients=2", []string{"clients=2", "clients=4"}},
		{" clients=1 ; clients=2 ", []string{"clients=1", "clients=2"}},
	} {
		pts, err := bisectPoints(sc, c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got := pointNames(pts); !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, want %v", c.in, got, c.want)
		}
	}
	for _, bad := range []string{"", "clients=3", "clients=1;clients=3", "clients=1;clients=1"} {
		if _, err := bisectPoints(sc, bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: %v, want a bad request", bad, err)
		}
	}
	if got := splitPoints("clients=1,workers=2,clients=4,workers=2;a=1"); !slices.Equal(got, []string{"clients=1,workers=2", "clients=4,workers=2", "a=1"}) {
		t.Errorf("splitPoints: %v", got)
	}
}

// TestCulpritPoint: a culprit of several points is revert-checked and
// profiled where it was blamed with the largest effect, never at a point
// where it was only measured for the curve.
func TestCulpritPoint(t *testing.T) {
	sc, err := bench.LoadFileWith("../../configs/scenarios/copy-concurrent.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	def, _ := sc.FindPoint("clients=1")
	c := finding.Culprit{Comparisons: []finding.Comparison{
		{Point: "clients=1", Ratio: 1.9, Curve: true},
		{Point: "clients=2", Ratio: 1.2},
		{Point: "clients=4", Ratio: 1.4},
	}}
	if got := culpritPoint(sc, def, c).String(); got != "clients=4" {
		t.Errorf("culpritPoint: %s, want clients=4", got)
	}
	if got := (RevertInputs{Scenario: sc, Point: def}).at(c).Point.String(); got != "clients=4" {
		t.Errorf("revert check at %s, want clients=4", got)
	}
	one := finding.Culprit{Comparisons: []finding.Comparison{{Ratio: 1.2}}}
	if got := culpritPoint(sc, def, one).String(); got != "clients=1" {
		t.Errorf("a single point's culprit: %s, want the bisection's point", got)
	}
}
