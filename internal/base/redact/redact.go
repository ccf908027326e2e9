// Package redact hides secrets in text that pgbisect prints, logs, stores
// or posts: passwords in database connection strings (URL form, query
// parameters and keyword/value form) and credentials in any URL, such as
// a --repo https://user:token@host/... clone URL.
//
// It works on text rather than parsed values on purpose: the same function
// then covers an error message that quotes a URL, a report's reproduce
// line and a status line, whatever put the URL there.
package redact

import (
	"regexp"
	"strings"
)

// Mask replaces every hidden secret.
const Mask = "xxxxx"

var (
	// userinfo with a password in any URL: scheme://user:secret@
	urlPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@?#]*):[^/\s?#]*@`)
	// a bare token as userinfo (https://ghp_xxx@github.com/...): a user
	// name that looks like a GitHub or bearer token.
	urlToken = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)(gh[pousr]_[A-Za-z0-9_]+|github_pat_[A-Za-z0-9_]+|[A-Za-z0-9_-]{32,})@`)
	// password=... and sslpassword=... as URL query parameters.
	queryPassword = regexp.MustCompile(`(?i)([?&](?:ssl)?password=)[^&#\s]*`)
	// password = value, password='quoted value' in keyword/value form.
	keywordPassword = regexp.MustCompile(`(?i)(^|[\s])((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s']\S*)`)
)

// String hides every password and URL credential in s.
func String(s string) string {
	if s == "" {
		return s
	}
	s = urlPassword.ReplaceAllString(s, "${1}:"+Mask+"@")
	s = urlToken.ReplaceAllString(s, "${1}"+Mask+"@")
	if strings.Contains(strings.ToLower(s), "password") {
		s = queryPassword.ReplaceAllString(s, "${1}"+Mask)
		s = keywordPassword.ReplaceAllString(s, "${1}${2}"+Mask)
	}
	return s
}
