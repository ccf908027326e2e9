package notify

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/pgbisect/pgbisect/bench/stats"
	"github.com/pgbisect/pgbisect/bisect/finding"
)

// The plots WritePlots draws, by file name without extension.
const (
	PlotBisection = "bisection" // samples of every commit measured, in history order
	PlotSeries    = "series"    // nightly values over time
	PlotProgress  = "progress"  // pgbench -P throughput per second of each side
	PlotCurve     = "curve"     // the metric at every point before and after each culprit
)

var (
	colGood    = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} // blue
	colBad     = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff} // red
	colOther   = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff} // grey
	colCulprit = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff} // orange
	colLine    = color.RGBA{R: 0x33, G: 0x33, B: 0x33, A: 0xff}
)

const (
	plotWidth  = 9 * vg.Inch
	plotHeight = 5 * vg.Inch
)

// WritePlots draws every plot f has data for into dir, each as SVG and
// PNG, and returns the file names written, PNG first in each pair. A finding
// without samples, series or progress gives no plots.
func WritePlots(dir string, f *finding.Finding) ([]string, error) {
	var names []string
	for _, pl := range []struct {
		name string
		draw func(*finding.Finding) (*plot.Plot, error)
	}{
		{PlotBisection, bisectionPlot},
		{PlotSeries, seriesPlot},
		{PlotProgress, progressPlot},
		{PlotCurve, curvePlot},
	} {
		p, err := pl.draw(f)
		if err != nil {
			return names, fmt.Errorf("drawing the %s plot of finding %s: %w", pl.name, f.ID, err)
		}
		if p == nil {
			continue
		}
		for _, ext := range []string{".png", ".svg"} {
			path := filepath.Join(dir, pl.name+ext)
			if err := savePlot(p, path); err != nil {
				return names, err
			}
			names = append(names, pl.name+ext)
		}
	}
	return names, nil
}

// savePlot writes p to path through a temporary file, so a reader never
// sees half a plot.
func savePlot(p *plot.Plot, path string) error {
	tmp := path + ".tmp" + filepath.Ext(path)
	if err := p.Save(plotWidth, plotHeight, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing plot %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing plot %s: %w", path, err)
	}
	return nil
}

func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Title.Padding = vg.Points(8)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(4)
	p.Add(plotter.NewGrid())
	return p
}

// legendRoom sets the y range to [lo, hi] plus headroom for the legend in
// the top left corner, so the legend never hides data.
func legendRoom(p *plot.Plot, lo, hi float64, rows int) {
	p.Y.Min, p.Y.Max = lo, hi+(hi-lo)*0.085*float64(rows)
}

func yLabel(metric, unit string, d stats.Direction) string {
	s := metric
	if unit != "" {
		s += " (" + unit + ")"
	}
	if dw := directionWord(d); dw != "" {
		s += ", " + dw
	}
	return s
}

// bisectionPlot shows the samples of every commit measured in the bisection,
// in history order, coloured by verdict, with each culprit marked by a
// vertical line between it and its parent.
func bisectionPlot(f *finding.Finding) (*plot.Plot, error) {
	type col struct {
		commit  finding.Commit
		order   int
		verdict string
		samples []float64
	}
	byHash := map[string]*col{}
	var cols []*col
	at := logPoint(f)
	for _, s := range f.Log {
		if s.Point != at {
			continue // a bisection of several points: one point's log
		}
		c := byHash[s.Commit.Hash]
		if c == nil {
			c = &col{commit: s.Commit, order: s.Order}
			byHash[s.Commit.Hash] = c
			cols = append(cols, c)
		}
		c.verdict = s.Verdict // the last verdict wins: a re-verification
		c.samples = append(c.samples, s.Samples...)
	}
	n := 0
	for _, c := range cols {
		n += len(c.samples)
	}
	if n == 0 {
		return nil, nil
	}
	slices.SortStableFunc(cols, func(a, b *col) int { return a.order - b.order })

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range cols {
		for _, v := range c.samples {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	pad := (hi - lo) * 0.08
	if pad == 0 {
		pad = math.Abs(hi)*0.05 + 1e-9
	}
	lo, hi = lo-pad, hi+pad

	title := fmt.Sprintf("%s: bisection on %s", f.Scenario, f.Branch)
	what := f.Metric
	if at != "" {
		what += " at " + at
	} else if f.Point != "" {
		what += " at " + f.Point
	}
	p := newPlot(title+" ("+what+")", "commit, oldest first", yLabel(f.Metric, f.Unit, f.Direction))
	p.Y.Min, p.Y.Max = lo, hi

	var names []string
	pts := map[string]plotter.XYs{}
	var medians plotter.XYs
	var unmeasured plotter.XYs
	for i, c := range cols {
		names = append(names, finding.KeyHash(c.commit)[:min(7, len(finding.KeyHash(c.commit)))])
		class := finding.StepGood
		switch c.verdict {
		case finding.StepGood:
		case finding.StepBad:
			class = finding.StepBad
		default:
			class = "other"
		}
		for j, v := range c.samples {
			// Spread the samples of one commit sideways so equal values
			// stay visible; deterministic, so plots are reproducible.
			dx := 0.0
			if len(c.samples) > 1 {
				dx = -0.2 + 0.4*float64(j)/float64(len(c.samples)-1)
			}
			pts[class] = append(pts[class], plotter.XY{X: float64(i) + dx, Y: v})
		}
		if len(c.samples) > 0 {
			medians = append(medians, plotter.XY{X: float64(i), Y: median(c.samples)})
		} else {
			unmeasured = append(unmeasured, plotter.XY{X: float64(i), Y: lo + pad/2})
		}
	}
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 4
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.X.Min, p.X.Max = -0.6, float64(len(cols))-0.4

	for _, cl := range []struct {
		class, label string
		c            color.Color
	}{{finding.StepGood, "good", colGood}, {finding.StepBad, "bad", colBad}, {"other", "skipped / inconclusive", colOther}} {
		if len(pts[cl.class]) == 0 {
			continue
		}
		s, err := plotter.NewScatter(pts[cl.class])
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: cl.c, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
		p.Add(s)
		p.Legend.Add(cl.label, s)
	}
	if len(medians) > 0 {
		s, err := plotter.NewScatter(medians)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: colLine, Radius: vg.Points(5), Shape: draw.BoxGlyph{}}
		s.GlyphStyle.Radius = vg.Points(3)
		s.GlyphStyle.Shape = draw.PlusGlyph{}
		p.Add(s)
		p.Legend.Add("median", s)
	}
	if len(unmeasured) > 0 {
		s, err := plotter.NewScatter(unmeasured)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: colOther, Radius: vg.Points(4), Shape: draw.CrossGlyph{}}
		p.Add(s)
		p.Legend.Add("not measured (unbuildable, no-compile)", s)
	}

	index := map[string]int{}
	for i, c := range cols {
		index[c.commit.Hash] = i
	}
	for k, c := range f.Culprits {
		first := c.Commit
		if c.IsRange() {
			first = c.Range[0]
		}
		i, ok := index[first.Hash]
		x := float64(i) - 0.5
		if !ok {
			j, ok := index[c.Parent.Hash]
			if !ok {
				continue
			}
			x = float64(j) + 0.5
		}
		xs := []float64{x}
		if j, ok := index[culpritTip(c).Hash]; ok && c.IsRange() {
			xs = append(xs, float64(j)+0.5) // a range is bracketed
		}
		var l *plotter.Line
		for _, x := range xs {
			var err error
			l, err = plotter.NewLine(plotter.XYs{{X: x, Y: lo}, {X: x, Y: hi}})
			if err != nil {
				return nil, err
			}
			l.LineStyle = draw.LineStyle{Color: colCulprit, Width: vg.Points(2), Dashes: []vg.Length{vg.Points(6), vg.Points(3)}}
			p.Add(l)
		}
		label := "culprit " + finding.CulpritKey(&f.Culprits[k])
		if cmp := mainComparison(c.Comparisons, f.Kind); cmp != nil {
			label += " (" + pct(cmp.Ratio) + ")"
		}
		p.Legend.Add(label, l)
	}
	legendRoom(p, lo, hi, len(pts)+2+len(f.Culprits))
	return p, nil
}

// seriesPlot shows the nightly medians over time with change points as
// vertical lines and nights that led to a finding as triangles.
func seriesPlot(f *finding.Finding) (*plot.Plot, error) {
	s := f.Series
	if s == nil || len(s.Points) == 0 {
		return nil, nil
	}
	what := s.Metric
	if s.Point != "" {
		what += " at " + s.Point
	}
	p := newPlot(fmt.Sprintf("%s: nightly %s on %s", f.Scenario, what, f.Branch), "night (UTC)", yLabel(s.Metric, s.Unit, f.Direction))
	p.X.Tick.Marker = plot.TimeTicks{Format: "2006-01-02"}
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight

	var xys, found plotter.XYs
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, pt := range s.Points {
		xy := plotter.XY{X: unix(pt.At), Y: pt.Median}
		xys = append(xys, xy)
		if pt.FindingID != "" {
			found = append(found, xy)
		}
		lo, hi = math.Min(lo, pt.Median), math.Max(hi, pt.Median)
	}
	pad := (hi - lo) * 0.1
	if pad == 0 {
		pad = math.Abs(hi)*0.05 + 1e-9
	}
	lo, hi = lo-pad, hi+pad
	p.Y.Min, p.Y.Max = lo, hi

	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, err
	}
	line.LineStyle = draw.LineStyle{Color: colGood, Width: vg.Points(1.2)}
	points.GlyphStyle = draw.GlyphStyle{Color: colGood, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
	p.Add(line, points)
	p.Legend.Add("nightly median", line, points)

	confirmedShown, unconfirmedShown := false, false
	for _, cp := range s.ChangePoints {
		if cp.Index <= 0 || cp.Index >= len(s.Points) {
			continue
		}
		x := (unix(s.Points[cp.Index-1].At) + unix(s.Points[cp.Index].At)) / 2
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: lo}, {X: x, Y: hi}})
		if err != nil {
			return nil, err
		}
		if cp.Confirmed {
			l.LineStyle = draw.LineStyle{Color: colCulprit, Width: vg.Points(2), Dashes: []vg.Length{vg.Points(6), vg.Points(3)}}
			if !confirmedShown {
				p.Legend.Add("change point (confirmed)", l)
				confirmedShown = true
			}
		} else {
			l.LineStyle = draw.LineStyle{Color: colOther, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}
			if !unconfirmedShown {
				p.Legend.Add("change point (not confirmed)", l)
				unconfirmedShown = true
			}
		}
		p.Add(l)
	}
	if len(found) > 0 {
		sc, err := plotter.NewScatter(found)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: colBad, Radius: vg.Points(5), Shape: draw.TriangleGlyph{}}
		p.Add(sc)
		p.Legend.Add("finding", sc)
	}
	legendRoom(p, lo, hi, 4)
	return p, nil
}

// progressPlot shows pgbench -P throughput per interval of every run, good
// runs blue and bad runs red.
func progressPlot(f *finding.Finding) (*plot.Plot, error) {
	if len(f.Progress) == 0 {
		return nil, nil
	}
	p := newPlot(fmt.Sprintf("%s: pgbench progress of each run", f.Scenario), "seconds into the run", "throughput (tps)")
	shown := map[string]bool{}
	top := 0.0
	for _, run := range f.Progress {
		iv := run.Interval
		if iv <= 0 {
			iv = 1
		}
		var xys plotter.XYs
		for i, v := range run.TPS {
			xys = append(xys, plotter.XY{X: float64(i+1) * iv, Y: v})
			top = math.Max(top, v)
		}
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		c := colOther
		switch run.Side {
		case "good":
			c = colGood
		case "bad":
			c = colBad
		}
		l.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1)}
		p.Add(l)
		if !shown[run.Side] {
			p.Legend.Add(run.Side+" "+run.Commit, l)
			shown[run.Side] = true
		}
	}
	legendRoom(p, 0, top*1.05, len(shown))
	return p, nil
}

func unix(t time.Time) float64 { return float64(t.Unix()) }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
