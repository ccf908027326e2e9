package notify

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// TestWriteReportPlots draws every plot of the fixed findings and checks the
// files are real SVG and PNG images of a useful size, and that the Markdown
// report links them.
func TestWriteReportPlots(t *testing.T) {
	cases := []struct {
		f    *finding.Finding
		want []string
	}{
		{twoCulprits(), []string{"bisection.png", "bisection.svg"}},
		{rangeCulprit(), []string{"bisection.png", "bisection.svg", "progress.png", "progress.svg"}},
		{improvement(), []string{"bisection.png", "bisection.svg", "series.png", "series.svg"}},
	}
	for _, c := range cases {
		t.Run(c.f.ID, func(t *testing.T) {
			dir := t.TempDir()
			if out := os.Getenv("PGBISECT_PLOT_DIR"); out != "" { // to look at them
				dir = filepath.Join(out, c.f.ID)
			}
			files, err := WriteReport(dir, c.f)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.f.Plots, c.want) {
				t.Errorf("plots = %v, want %v", c.f.Plots, c.want)
			}
			for _, name := range append(c.want, ReportMarkdown, ReportText, ReportJSON) {
				if !slices.Contains(files, name) {
					t.Errorf("WriteReport did not report writing %s (wrote %v)", name, files)
				}
			}
			for _, name := range c.want {
				data, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if len(data) < 4<<10 {
					t.Errorf("%s is only %d bytes", name, len(data))
				}
				switch filepath.Ext(name) {
				case ".png":
					img, err := png.Decode(bytes.NewReader(data))
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 300 {
						t.Errorf("%s is %dx%d pixels, too small to read", name, b.Dx(), b.Dy())
					}
				case ".svg":
					checkSVG(t, name, data)
				}
			}
			md, err := os.ReadFile(filepath.Join(dir, ReportMarkdown))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(md), "![bisection](bisection.png)") {
				t.Errorf("report.md does not show the bisection plot:\n%s", md)
			}
			back, err := finding.ReadFile(filepath.Join(dir, ReportJSON))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(back.Plots, c.want) {
				t.Errorf("report.json lists plots %v, want %v", back.Plots, c.want)
			}
		})
	}
}

// checkSVG parses data as XML and checks the root is an <svg> element with
// drawing in it.
func checkSVG(t *testing.T, name string, data []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	root, elems := "", 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", name, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			elems++
		}
	}
	if root != "svg" || elems < 50 {
		t.Errorf("%s: root element %q with %d elements, want an svg drawing", name, root, elems)
	}
}

// TestNoPlotsWithoutSamples checks a finding with nothing to draw writes no
// plot files and the Markdown does not link any.
func TestNoPlotsWithoutSamples(t *testing.T) {
	f := noRegression()
	f.Log = nil
	dir := t.TempDir()
	if _, err := WriteReport(dir, f); err != nil {
		t.Fatal(err)
	}
	if len(f.Plots) != 0 {
		t.Errorf("plots = %v, want none", f.Plots)
	}
	md, _ := os.ReadFile(filepath.Join(dir, ReportMarkdown))
	if strings.Contains(string(md), "### Plots") {
		t.Errorf("report.md has a plots section without plots")
	}
}
