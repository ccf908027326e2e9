package notify

import (
	"context"
	"path/filepath"

	"github.com/pgbisect/pgbisect/internal/finding"
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
	}
	return dir, nil
}
