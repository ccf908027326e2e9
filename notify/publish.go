package notify

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// Adder records a finding in an outbox; the results store implements it.
type Adder interface {
	Add(ctx context.Context, f *finding.Finding) error
}

// ReportsDir is where reports are written under a state directory; serve
// it at github.report_url to show plots in issues.
func ReportsDir(stateDir string) string { return filepath.Join(stateDir, "reports") }

// Publish writes the report of f (files and plots) into reportsDir/<id>/
// and then adds f to out, so that it is posted by the next Deliver (or
// "pgbisect post --pending"). It returns the report directory. bisect and
// the nightly pass call it for every finding, posting or not.
func Publish(ctx context.Context, reportsDir string, f *finding.Finding, out Adder) (string, error) {
	if err := f.Validate(); err != nil {
		return "", err
	}
	dir := filepath.Join(reportsDir, f.ID)
	if _, err := WriteReport(dir, f); err != nil {
		return "", err
	}
	if out != nil {
		if err := out.Add(ctx, f); err != nil {
			return dir, err
		}
		if err := addFiles(ctx, dir, f, out); err != nil {
			return dir, err
		}
	}
	return dir, nil
}

// FileAdder is an Adder that also keeps the files a report links but
// cannot draw again from the finding (a culprit's flame graph), so a
// reader of the outbox on another machine can serve them. The results
// store implements it.
type FileAdder interface {
	AddFile(ctx context.Context, id, name string, data []byte) error
}

// addFiles gives out the flame graphs of f found in its report directory,
// when out keeps files. A flame graph missing from dir is left out (the
// report still names it).
func addFiles(ctx context.Context, dir string, f *finding.Finding, out Adder) error {
	fa, ok := out.(FileAdder)
	if !ok {
		return nil
	}
	for _, c := range f.Culprits {
		if c.Profile == nil || c.Profile.FlameGraph == "" {
			continue
		}
		name := filepath.Base(c.Profile.FlameGraph)
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := fa.AddFile(ctx, f.ID, name, data); err != nil {
			return err
		}
	}
	return nil
}
