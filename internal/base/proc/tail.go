package proc

import "strings"

// Tail returns the last n lines of a child's output or log, without the
// final newline: what an error shows of what went wrong.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
