package finding

import "strings"

// FirstLine returns s up to its first newline, trimmed: a commit's subject
// from its message, or a note or an error as one line.
func FirstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}
