package notify

// Reports of bisections of several points (a curve): the log point by
// point, and a plot of the metric at every point before and after each
// culprit. The table of the curve is the culprit's comparison table,
// one row per point.

import (
	"fmt"
	"image/color"
	"math"

	"github.com/pgbisect/pgbisect/bisect/finding"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// curveLogSection is the bisection log of several points: each point's
// search in turn, with a point column.
func curveLogSection(f *finding.Finding, st style, s section, t table) section {
	what := st.esc(f.Metric)
	if dw := directionWord(f.Direction); dw != "" {
		what += " (" + dw + ")"
	}
	s.blocks = []block{para{fmt.Sprintf("Each commit measured at each point, point by point, in history order; median of %s.", what)}}
	t.head = append([]string{"#", "point"}, t.head[1:]...)
	t.right = []bool{true, false, false, true, true}
	for i, step := range f.Log {
		med, n := "", ""
		if step.N > 0 {
			med, n = value(step.Median, f.Unit), fmt.Sprint(step.N)
		}
		v := step.Verdict
		if step.Note != "" {
			v += ": " + abbrev(finding.FirstLine(step.Note), 60)
		}
		t.rows = append(t.rows, []string{fmt.Sprint(i + 1), st.esc(step.Point), st.link(st.code(finding.KeyHash(step.Commit)), step.Commit.URL),
			med, n, st.esc(v), st.esc(finding.FirstLine(step.Commit.Subject))})
	}
	s.blocks = append(s.blocks, t)
	return s
}

// logPoint is the point whose log the bisection plot shows: for several
// points, the one where the first culprit was blamed (else the first
// point); "" for one point.
func logPoint(f *finding.Finding) string {
	if len(f.Points) == 0 {
		return ""
	}
	if len(f.Culprits) > 0 {
		if p := finding.BlamedPoint(f.Culprits[0]); p != "" {
			return p
		}
	}
	return f.Points[0]
}

// curvePlot draws, for each culprit of a bisection of several points,
// the median of the metric at every point on its parent (solid) and on
// the culprit (dashed).
func curvePlot(f *finding.Finding) (*plot.Plot, error) {
	if len(f.Points) == 0 || len(f.Culprits) == 0 {
		return nil, nil
	}
	p := newPlot(fmt.Sprintf("%s: the curve before and after each culprit", f.Scenario), "point", yLabel(f.Metric, f.Unit, f.Direction))
	p.NominalX(f.Points...)
	p.X.Min, p.X.Max = -0.4, float64(len(f.Points))-0.6
	palette := []color.Color{colCulprit, colBad, colGood, colOther}
	lo, hi := math.Inf(1), math.Inf(-1)
	rows := 0
	for k, c := range f.Culprits {
		var before, after plotter.XYs
		for _, cmp := range c.Comparisons {
			x := -1
			for i, pt := range f.Points {
				if pt == cmp.Point {
					x = i
				}
			}
			if x < 0 || cmp.Good.N == 0 || cmp.Bad.N == 0 {
				continue
			}
			before = append(before, plotter.XY{X: float64(x), Y: cmp.Good.Median})
			after = append(after, plotter.XY{X: float64(x), Y: cmp.Bad.Median})
			lo, hi = math.Min(lo, math.Min(cmp.Good.Median, cmp.Bad.Median)), math.Max(hi, math.Max(cmp.Good.Median, cmp.Bad.Median))
		}
		if len(before) == 0 {
			continue
		}
		cl := palette[k%len(palette)]
		for i, xy := range []plotter.XYs{before, after} {
			l, s, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, err
			}
			l.LineStyle = draw.LineStyle{Color: cl, Width: vg.Points(1.5)}
			s.GlyphStyle = draw.GlyphStyle{Color: cl, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
			label := "parent " + finding.KeyHash(c.Parent)
			if i == 1 {
				l.LineStyle.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
				s.GlyphStyle.Shape = draw.TriangleGlyph{}
				label = "culprit " + finding.CulpritKey(&f.Culprits[k])
			}
			p.Add(l, s)
			p.Legend.Add(label, l, s)
			rows++
		}
	}
	if rows == 0 {
		return nil, nil
	}
	pad := (hi - lo) * 0.1
	if pad == 0 {
		pad = math.Abs(hi)*0.05 + 1e-9
	}
	legendRoom(p, lo-pad, hi+pad, rows)
	return p, nil
}
