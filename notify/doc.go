package notify

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// A report is built once as a doc — sections of paragraphs, tables, lists
// and code — and written as Markdown or as plain text, so both formats say
// the same thing in the same order. Inline markup (code spans, links) is
// applied by a style while the doc is built.

type doc struct {
	sections []section
}

type section struct {
	heading string // "" for the lead
	blocks  []block
}

type block interface{ isBlock() }

type para struct{ text string }

// table is a table; right marks right-aligned columns. log marks the
// bisection log, the first thing clipped when a body is too long.
type table struct {
	head  []string
	rows  [][]string
	right []bool
	log   bool
}

// kv is a list of name/value pairs (environment, build options).
type kv struct{ pairs [][2]string }

// list is a list; ordered lists are numbered.
type list struct {
	items   []string
	ordered bool
}

type code struct{ lang, text string }

// small is a closing remark in small print.
type small struct{ text string }

func (para) isBlock()  {}
func (table) isBlock() {}
func (kv) isBlock()    {}
func (list) isBlock()  {}
func (code) isBlock()  {}
func (small) isBlock() {}

// style applies inline markup.
type style interface {
	code(s string) string
	link(text, url string) string
	bold(s string) string
	esc(s string) string
	markdown() bool
}

type mdStyle struct{}

func (mdStyle) code(s string) string {
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

func (mdStyle) link(text, url string) string {
	if url == "" {
		return text
	}
	return "[" + text + "](" + url + ")"
}

func (mdStyle) bold(s string) string { return "**" + s + "**" }

var mdEscaper = strings.NewReplacer(`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`,
	"<", "&lt;", ">", "&gt;", "#", `\#`, "|", `\|`, "~", `\~`)

func (mdStyle) esc(s string) string { return mdEscaper.Replace(s) }
func (mdStyle) markdown() bool      { return true }

type textStyle struct{}

func (textStyle) code(s string) string         { return s }
func (textStyle) link(text, url string) string { return text }
func (textStyle) bold(s string) string         { return s }
func (textStyle) esc(s string) string          { return s }
func (textStyle) markdown() bool               { return false }

// clipLog returns a copy of d whose log table keeps only its first and last
// keep/2 rows, with a row saying how many were cut. It also returns the
// number of log rows before clipping.
func (d doc) clipLog(keep int) (doc, int) {
	out := doc{sections: make([]section, len(d.sections))}
	total := 0
	for i, s := range d.sections {
		out.sections[i] = section{heading: s.heading, blocks: make([]block, len(s.blocks))}
		for j, b := range s.blocks {
			t, ok := b.(table)
			if !ok || !t.log || len(t.rows) <= keep {
				out.sections[i].blocks[j] = b
				if ok && t.log {
					total += len(t.rows)
				}
				continue
			}
			total += len(t.rows)
			head := keep / 2
			tail := keep - head
			rows := append([][]string{}, t.rows[:head]...)
			gap := make([]string, len(t.head))
			gap[0] = "…"
			if len(gap) > 1 {
				gap[1] = fmt.Sprintf("%d steps cut", len(t.rows)-keep)
			}
			rows = append(rows, gap)
			rows = append(rows, t.rows[len(t.rows)-tail:]...)
			t.rows = rows
			out.sections[i].blocks[j] = t
		}
	}
	return out, total
}

// writeMarkdown writes d as GitHub-flavoured Markdown.
func writeMarkdown(d doc) string {
	var b strings.Builder
	for _, s := range d.sections {
		if s.heading != "" {
			fmt.Fprintf(&b, "### %s\n\n", s.heading)
		}
		for _, bl := range s.blocks {
			switch bl := bl.(type) {
			case para:
				b.WriteString(bl.text + "\n\n")
			case table:
				row := func(cells []string) {
					b.WriteString("|")
					for _, c := range cells {
						c = strings.ReplaceAll(c, "\n", " ")
						b.WriteString(" " + c + " |")
					}
					b.WriteString("\n")
				}
				row(bl.head)
				b.WriteString("|")
				for i := range bl.head {
					if i < len(bl.right) && bl.right[i] {
						b.WriteString("---:|")
					} else {
						b.WriteString("---|")
					}
				}
				b.WriteString("\n")
				for _, r := range bl.rows {
					row(r)
				}
				b.WriteString("\n")
			case kv:
				for _, p := range bl.pairs {
					fmt.Fprintf(&b, "- %s: %s\n", p[0], p[1])
				}
				b.WriteString("\n")
			case list:
				for i, it := range bl.items {
					marker := "- "
					if bl.ordered {
						marker = fmt.Sprintf("%d. ", i+1)
					}
					it = strings.ReplaceAll(it, "\n", "\n"+strings.Repeat(" ", len(marker)))
					b.WriteString(marker + it + "\n")
				}
				b.WriteString("\n")
			case code:
				fence := "```"
				for strings.Contains(bl.text, fence) {
					fence += "`"
				}
				fmt.Fprintf(&b, "%s%s\n%s\n%s\n\n", fence, bl.lang, strings.TrimRight(bl.text, "\n"), fence)
			case small:
				fmt.Fprintf(&b, "<sub>%s</sub>\n\n", bl.text)
			}
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// textWidth is the width plain-text paragraphs are wrapped to, as in mail.
const textWidth = 72

// writeText writes d as plain text in the style of a mailing-list post.
func writeText(d doc) string {
	var b strings.Builder
	for _, s := range d.sections {
		if s.heading != "" {
			fmt.Fprintf(&b, "%s:\n\n", s.heading)
		}
		for _, bl := range s.blocks {
			switch bl := bl.(type) {
			case para:
				b.WriteString(wrap(bl.text, textWidth, "") + "\n\n")
			case table:
				writeTextTable(&b, bl)
			case kv:
				w := 0
				for _, p := range bl.pairs {
					w = max(w, utf8.RuneCountInString(p[0]))
				}
				for _, p := range bl.pairs {
					fmt.Fprintf(&b, "  %s:%s %s\n", p[0], strings.Repeat(" ", w-utf8.RuneCountInString(p[0])), p[1])
				}
				b.WriteString("\n")
			case list:
				for i, it := range bl.items {
					prefix := "- "
					if bl.ordered {
						prefix = fmt.Sprintf("%d. ", i+1)
					}
					b.WriteString("  " + prefix + wrap(it, textWidth-2-len(prefix), strings.Repeat(" ", 2+len(prefix))) + "\n")
				}
				b.WriteString("\n")
			case code:
				for _, l := range strings.Split(strings.TrimRight(bl.text, "\n"), "\n") {
					b.WriteString("    " + l + "\n")
				}
				b.WriteString("\n")
			case small:
				// Keep a signature's "-- " line as it is.
				if sig, rest, ok := strings.Cut(bl.text, "\n"); ok {
					b.WriteString(sig + "\n")
					bl.text = rest
				}
				b.WriteString(wrap(bl.text, textWidth, "") + "\n\n")
			}
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func writeTextTable(b *strings.Builder, t table) {
	widths := make([]int, len(t.head))
	all := append([][]string{t.head}, t.rows...)
	for _, r := range all {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
	}
	for _, r := range all {
		var line strings.Builder
		line.WriteString("  ")
		for i, c := range r {
			if i >= len(widths) {
				break
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i < len(t.right) && t.right[i] {
				line.WriteString(pad + c)
			} else if i == len(r)-1 {
				line.WriteString(c)
			} else {
				line.WriteString(c + pad)
			}
			if i < len(r)-1 {
				line.WriteString("  ")
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	b.WriteString("\n")
}

// wrap breaks s into lines of at most width runes at spaces; words longer
// than width (URLs) stay whole. Lines after the first get indent.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	for pi, paragraph := range strings.Split(s, "\n") {
		if pi > 0 {
			b.WriteString("\n" + indent)
		}
		col := 0
		for i, w := range strings.Fields(paragraph) {
			n := utf8.RuneCountInString(w)
			if i > 0 && col+1+n > width {
				b.WriteString("\n" + indent)
				col = 0
			} else if i > 0 {
				b.WriteString(" ")
				col++
			}
			b.WriteString(w)
			col += n
		}
	}
	return b.String()
}
