package notify

import "testing"

func BenchmarkMarkdown(b *testing.B) {
	f := twoCulprits()
	for b.Loop() {
		Markdown(f, Options{MaxLen: MaxBody})
	}
}

// BenchmarkMarkdownClip measures clipping a 5,000-step log under MaxBody.
func BenchmarkMarkdownClip(b *testing.B) {
	f := hugeLog(5000)
	for b.Loop() {
		Markdown(f, Options{MaxLen: MaxBody})
	}
}

// BenchmarkWritePlots measures drawing the bisection plot as PNG and SVG.
func BenchmarkWritePlots(b *testing.B) {
	f := twoCulprits()
	dir := b.TempDir()
	for b.Loop() {
		if _, err := WritePlots(dir, f); err != nil {
			b.Fatal(err)
		}
	}
}
