package profile

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
)

// node is one frame of a flame graph: a stack prefix.
type node struct {
	name     string
	after    float64 // share of the culprit's samples under this prefix
	before   float64 // share of the base's samples
	children map[string]*node
}

func (n *node) child(name string) *node {
	if n.children == nil {
		n.children = map[string]*node{}
	}
	c := n.children[name]
	if c == nil {
		c = &node{name: name}
		n.children[name] = c
	}
	return c
}

func (n *node) add(stack string, share float64, after bool) {
	cur := n
	for _, f := range strings.Split(stack, ";") {
		cur = cur.child(f)
		if after {
			cur.after += share
		} else {
			cur.before += share
		}
	}
}

// FlameGraphSVG writes a differential flame graph: the culprit's stacks,
// each frame as wide as its share of the culprit's samples, red where
// that share grew from base and blue where it shrank (deeper for more).
// Both sides are merged over their runs. Frames narrower than a tenth
// of a percent are left out.
func FlameGraphSVG(w io.Writer, title string, base, culprit Profile) error {
	root := &node{name: "all", after: 1, before: 1}
	for s, c := range culprit.Stacks {
		root.add(s, float64(c)/math.Max(1, float64(culprit.Samples)), true)
	}
	for s, c := range base.Stacks {
		root.add(s, float64(c)/math.Max(1, float64(base.Samples)), false)
	}
	const (
		width    = 1200.0
		frameH   = 16.0
		pad      = 10.0
		top      = 40.0
		minShare = 0.001
	)
	maxDelta, depth := 0.0, 0
	var walk func(n *node, d int)
	walk = func(n *node, d int) {
		if n.after < minShare {
			return
		}
		depth = max(depth, d)
		maxDelta = math.Max(maxDelta, math.Abs(n.after-n.before))
		for _, c := range n.children {
			walk(c, d+1)
		}
	}
	walk(root, 0)
	if maxDelta == 0 {
		maxDelta = 1
	}
	height := top + float64(depth+1)*frameH + 2*pad
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" xmlns="http://www.w3.org/2000/svg">
<style>text{font-family:Verdana,sans-serif;font-size:11px;fill:#000}rect{stroke:#fff;stroke-width:0.5}</style>
<rect x="0" y="0" width="100%%" height="100%%" fill="#f8f8f8"/>
<text x="%.0f" y="20" text-anchor="middle" style="font-size:15px">%s</text>
<text x="%.0f" y="34" text-anchor="middle">width: share of the culprit's CPU samples; red: share grew from base, blue: shrank (darkest %+.1f points)</text>
`, width+2*pad, height, width+2*pad, height, width/2+pad, html.EscapeString(title), width/2+pad, 100*maxDelta)
	var draw func(n *node, x float64, d int)
	draw = func(n *node, x float64, d int) {
		if n.after < minShare {
			return
		}
		wd := n.after * width
		y := height - pad - float64(d+1)*frameH
		delta := n.after - n.before
		fmt.Fprintf(bw, `<g><title>%s: %.2f%% of culprit, %.2f%% of base (%+.2f points)</title><rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"/>`,
			html.EscapeString(n.name), 100*n.after, 100*n.before, 100*delta, pad+x, y, wd, frameH, diffColor(delta/maxDelta))
		if chars := int(wd / 7); chars >= 3 {
			fmt.Fprintf(bw, `<text x="%.2f" y="%.1f">%s</text>`, pad+x+3, y+frameH-4, html.EscapeString(shortName(n.name, chars)))
		}
		bw.WriteString("</g>\n")
		names := make([]string, 0, len(n.children))
		for k := range n.children {
			names = append(names, k)
		}
		sort.Strings(names)
		cx := x
		for _, k := range names {
			c := n.children[k]
			draw(c, cx, d+1)
			cx += c.after * width
		}
	}
	draw(root, 0, 0)
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// diffColor maps a relative change in -1..1 to white through red (grew)
// or blue (shrank).
func diffColor(r float64) string {
	r = math.Max(-1, math.Min(1, r))
	fade := func(v float64) int { return int(math.Round(255 - 200*v)) }
	if r >= 0 {
		return fmt.Sprintf("rgb(255,%d,%d)", fade(r), fade(r))
	}
	return fmt.Sprintf("rgb(%d,%d,255)", fade(-r), fade(-r))
}
