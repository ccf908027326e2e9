package notify

import (
	"strings"
	"testing"
)

// TestReportsHideRepoCredentials: a --repo URL with a token, which ends up
// in the reproduce line, reaches no report file and no issue body.
func TestReportsHideRepoCredentials(t *testing.T) {
	f := twoCulprits()
	f.Reproduce = "pgbisect bisect -s copy.yaml --repo https://bot:ghp_reportTOKEN123@github.com/o/postgres.git --good a --bad b"
	p := &Poster{owner: "o", repo: "r"}
	for name, body := range map[string]string{
		"markdown": MarkdownFile(f),
		"text":     TextFile(f),
		"issue":    p.Body(f, Target{Key: "k"}),
	} {
		if strings.Contains(body, "ghp_reportTOKEN123") {
			t.Errorf("%s: the token reached the report", name)
		}
		if !strings.Contains(body, "https://bot:xxxxx@github.com/o/postgres.git") {
			t.Errorf("%s: the redacted URL is missing", name)
		}
	}
}
