package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The plots writePlots draws, by file name.
const (
	plotMemory = "memory.svg" // each process's RSS per night
	plotStore  = "store.svg"  // the store's size per night
)

// writePlots draws the night table's memory and store size into dir, as
// plotMemory (one line per process, keyed by name and pid as in the table,
// so a restarted daemon is a line of its own) and plotStore, and returns
// the paths written.
func writePlots(dir string, rows []nightRow) ([]string, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	var keys []string
	for _, r := range rows {
		for k := range r.rss {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)

	mem := nightPlot("soak run: resident memory per night", "RSS (MiB)", rows)
	for i, k := range keys {
		var xys plotter.XYs
		for _, r := range rows {
			if v, ok := r.rss[k]; ok {
				xys = append(xys, plotter.XY{X: float64(r.night), Y: float64(v) / 1024})
			}
		}
		if err := addLine(mem, k, xys, i); err != nil {
			return nil, err
		}
	}

	store := nightPlot("soak run: store size per night", "store size (MiB, pg_database_size)", rows)
	var xys plotter.XYs
	for _, r := range rows {
		xys = append(xys, plotter.XY{X: float64(r.night), Y: float64(r.storeBytes) / (1 << 20)})
	}
	if err := addLine(store, "store", xys, 0); err != nil {
		return nil, err
	}

	var paths []string
	for _, pl := range []struct {
		p    *plot.Plot
		name string
	}{{mem, plotMemory}, {store, plotStore}} {
		path := filepath.Join(dir, pl.name)
		if err := pl.p.Save(8*vg.Inch, 4*vg.Inch, path); err != nil {
			return paths, fmt.Errorf("writing plot %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// nightPlot is an empty plot with the nights of rows on its x axis and y
// from 0, so a flat line looks flat.
func nightPlot(title, ylabel string, rows []nightRow) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = "night"
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(4)
	p.Add(plotter.NewGrid())
	var ticks []plot.Tick
	for _, r := range rows {
		ticks = append(ticks, plot.Tick{Value: float64(r.night), Label: fmt.Sprint(r.night)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = float64(rows[0].night)-0.5, float64(rows[len(rows)-1].night)+0.5
	p.Y.Min = 0
	return p
}

// addLine adds a line with points, the i-th colour and glyph, to p and its
// legend.
func addLine(p *plot.Plot, name string, xys plotter.XYs, i int) error {
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("plotting %s: %w", name, err)
	}
	line.LineStyle = draw.LineStyle{Color: plotutil.Color(i), Width: vg.Points(1.5)}
	points.GlyphStyle = draw.GlyphStyle{Color: plotutil.Color(i), Radius: vg.Points(3), Shape: plotutil.Shape(i)}
	p.Add(line, points)
	p.Legend.Add(name, line, points)
	// Headroom above the data for the legend in the top left corner.
	if _, _, _, hi := plotter.XYRange(xys); hi*1.3 > p.Y.Max {
		p.Y.Max = hi * 1.3
	}
	return nil
}

// TestPlots draws fake nights; it starts nothing.
func TestPlots(t *testing.T) {
	rows := []nightRow{
		{night: 1, rss: map[string]int64{"serve/100": 33000, "soak-a/200": 34000, "soak-b/300": 37000}, storeBytes: 9 << 20},
		{night: 2, rss: map[string]int64{"serve/100": 34000, "soak-a/400": 33500, "soak-b/300": 41000}, storeBytes: 9<<20 + 1<<19},
		{night: 3, rss: map[string]int64{"serve/100": 34100, "soak-a/400": 34200, "soak-b/300": 41500}, storeBytes: 10 << 20},
	}
	dir := t.TempDir()
	paths, err := writePlots(dir, rows)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		plotMemory: {"RSS (MiB)", "night", "serve/100", "soak-a/200", "soak-a/400", "soak-b/300"},
		plotStore:  {"store size (MiB", "night"},
	}
	if len(paths) != len(want) {
		t.Fatalf("wrote %v, want %d plots", paths, len(want))
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		svg := string(data)
		if !strings.Contains(svg, "<svg") {
			t.Errorf("%s is not an SVG", path)
		}
		for _, s := range want[filepath.Base(path)] {
			if !strings.Contains(svg, ">"+s) {
				t.Errorf("%s: no %q", path, s)
			}
		}
	}
	if paths, err := writePlots(dir, nil); err != nil || paths != nil {
		t.Errorf("no nights: %v, %v; want no plots", paths, err)
	}
}
