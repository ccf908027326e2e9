// Package strictyaml turns go-yaml's errors into the messages every strict
// YAML loader in pgbisect gives (the config file and scenarios):
// "file:line: message", with a "did you mean" hint for an unknown key. It is
// a leaf package so that the libraries that load YAML (bench) and the
// config that composes them share one copy without importing each other.
package strictyaml

import (
	"fmt"
	"regexp"
	"strings"
)

var yamlPos = regexp.MustCompile(`^\[(\d+):(\d+)\]\s*`)
var unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)

// Error turns a go-yaml error into "file:line: message", adding a
// "did you mean" hint when an unknown key is close to a known one.
func Error(file string, err error, known []string) error {
	msg := err.Error()
	// go-yaml appends a source excerpt after the first line; keep line one.
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	loc := file
	if m := yamlPos.FindStringSubmatch(msg); m != nil {
		loc = fmt.Sprintf("%s:%s", file, m[1])
		msg = msg[len(m[0]):]
	}
	if m := unknownField.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("unknown key %q", m[1])
		if s := Closest(m[1], known); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
	}
	return fmt.Errorf("%s: %s", loc, msg)
}

// Closest returns the candidate nearest to s by edit distance, or "" when
// none is close enough to be a likely typo.
func Closest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+1
	if bestD > 3 {
		bestD = 3
	}
	for _, c := range candidates {
		if d := distance(s, c); d < bestD || (d == bestD && best == "" && d <= 1) {
			best, bestD = c, d
		}
	}
	return best
}

func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
