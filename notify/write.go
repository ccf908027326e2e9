package notify

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// File names WriteReport writes.
const (
	ReportMarkdown = "report.md"
	ReportText     = "report.txt"
	ReportJSON     = "report.json"
)

// WriteReport writes the report of f into dir (created if missing): the
// plots first, recording their names in f.Plots so the Markdown links them,
// then report.md, report.txt and report.json. It returns the file names
// written.
func WriteReport(dir string, f *finding.Finding) ([]string, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating report directory: %w", err)
	}
	plots, err := WritePlots(dir, f)
	if err != nil {
		return nil, err
	}
	f.Plots = plots
	js, err := finding.Marshal(f)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		ReportMarkdown: []byte(MarkdownFile(f)),
		ReportText:     []byte(TextFile(f)),
		ReportJSON:     js,
	}
	names := append([]string{}, plots...)
	for _, name := range []string{ReportMarkdown, ReportText, ReportJSON} {
		if err := writeFileAtomic(filepath.Join(dir, name), files[name]); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// MarkdownFile is the Markdown report as a file: the title as a heading,
// then the body, plots linked relative to the file.
func MarkdownFile(f *finding.Finding) string {
	return "# " + strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(Title(f)) + "\n\n" + Markdown(f, Options{})
}

// TextFile is the plain-text report as a file: a Subject line, then the
// body, ready to paste into a mail.
func TextFile(f *finding.Finding) string {
	return "Subject: " + Title(f) + "\n\n" + Text(f, Options{})
}

// writeFileAtomic writes data to path through a temporary file and a rename,
// so a crash never leaves a half-written file behind.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
