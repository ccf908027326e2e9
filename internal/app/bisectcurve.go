package app

// Bisections of several points (issue 20, item 1): --point takes a list
// of points or "all"; the search is bisect's (bisect/curve.go). This file
// parses the list and measures at any of its points; revert checks and
// profiles of a culprit run at the point where it was blamed with the
// largest effect (finding.BlamedPoint).

import (
	"context"
	"fmt"
	"strings"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bisect"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// bisectPoints finds the matrix points to bisect at: "" the only one, a
// point ("clients=1"), a list of points separated by ';' or written one
// after the other ("clients=1,clients=4": a point ends where a variable
// repeats), or "all".
func bisectPoints(sc *bench.Scenario, p string) ([]bench.Point, error) {
	p = strings.TrimSpace(p)
	if p == "all" {
		return sc.Points(), nil
	}
	list := splitPoints(p)
	if len(list) <= 1 {
		pt, err := bisectPoint(sc, p)
		if err != nil {
			return nil, err
		}
		return []bench.Point{pt}, nil
	}
	var out []bench.Point
	seen := map[string]bool{}
	for _, s := range list {
		pt, err := sc.FindPoint(s)
		if err != nil {
			return nil, badRequest("--point %q: %v", p, err)
		}
		if seen[pt.String()] {
			return nil, badRequest("--point %q lists %s twice", p, pt)
		}
		seen[pt.String()] = true
		out = append(out, pt)
	}
	// In the scenario's order, so the curve reads left to right.
	var ordered []bench.Point
	for _, pt := range sc.Points() {
		if seen[pt.String()] {
			ordered = append(ordered, pt)
		}
	}
	return ordered, nil
}

// splitPoints splits a list of points at ';', and within each part
// starts a new point where a variable repeats.
func splitPoints(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		var cur []string
		seen := map[string]bool{}
		for _, kv := range strings.Split(part, ",") {
			k, _, _ := strings.Cut(kv, "=")
			if seen[k] {
				out = append(out, strings.Join(cur, ","))
				cur, seen = nil, map[string]bool{}
			}
			seen[k] = true
			cur = append(cur, kv)
		}
		out = append(out, strings.Join(cur, ","))
	}
	return out
}

// pointNames are the points as bisect.Inputs.Points hold them.
func pointNames(pts []bench.Point) []string {
	var names []string
	for _, pt := range pts {
		names = append(names, pt.String())
	}
	return names
}

// MeasureAt implements bisect.PointMeasurer: one run at point.
func (m *bisectMeasurer) MeasureAt(ctx context.Context, target bisect.Target, point string) (float64, error) {
	for _, pt := range m.points {
		if pt.String() == point {
			return m.measureAt(ctx, target, pt)
		}
	}
	return 0, fmt.Errorf("bisection %s has no point %s", m.id, point)
}

// culpritPoint is the point to revert-check or profile culprit c at: the
// one it was blamed at with the largest effect, else def.
func culpritPoint(sc *bench.Scenario, def bench.Point, c finding.Culprit) bench.Point {
	if p := finding.BlamedPoint(c); p != "" && p != def.String() {
		if pt, err := sc.FindPoint(p); err == nil {
			return pt
		}
	}
	return def
}

// at is in with the point of culprit c (culpritPoint): a revert check of
// a bisection of several points runs where the culprit was blamed, and
// the check of all culprits where the first (largest) one was.
func (in RevertInputs) at(c finding.Culprit) RevertInputs {
	if in.Scenario != nil {
		in.Point = culpritPoint(in.Scenario, in.Point, c)
	}
	return in
}
