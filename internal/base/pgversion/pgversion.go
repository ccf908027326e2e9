// Package pgversion parses PostgreSQL version strings ("9.6devel", "9.6.24",
// "15.18", "17beta1") and version constraints ("<10", ">=9.6 <13").
//
// The design choice that matters: a version is reduced to the number
// PostgreSQL itself uses (PG_VERSION_NUM: 90624, 150018), and a development
// or pre-release version counts as the first release of its major version
// (17devel is 170000), since that is the feature set it is heading for.
// Callers that need to know what a particular build accepts ask the build
// (postgres --describe-config); the version only decides defaults.
package pgversion

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a parsed PostgreSQL version.
type Version struct {
	// Num is the version as PG_VERSION_NUM: major*10000 + minor for 10 and
	// later (15.18 is 150018), major*10000 + second*100 + minor before
	// (9.6.24 is 90624). A pre-release has minor 0.
	Num int
	// Pre is the pre-release tag ("devel", "beta1", "rc1"), or "".
	Pre string
	// Text is the string parsed.
	Text string
}

// Parse parses a version such as "9.6devel", "9.6.24", "10beta2", "15.18"
// or "17devel".
func Parse(s string) (Version, error) {
	text := strings.TrimSpace(s)
	num, rest := leadingNumbers(text)
	if len(num) == 0 {
		return Version{}, fmt.Errorf("version %q: not a PostgreSQL version (want e.g. 9.6.24, 15.18 or 17devel)", s)
	}
	pre := ""
	if rest != "" {
		for _, p := range []string{"devel", "alpha", "beta", "rc"} {
			if strings.HasPrefix(rest, p) {
				pre = rest
				break
			}
		}
		if pre == "" {
			return Version{}, fmt.Errorf("version %q: unexpected %q after the numbers", s, rest)
		}
	}
	v := Version{Pre: pre, Text: text}
	switch {
	case num[0] >= 10 && len(num) <= 2:
		v.Num = num[0] * 10000
		if len(num) == 2 {
			v.Num += num[1]
		}
	case num[0] < 10 && len(num) >= 2 && len(num) <= 3:
		v.Num = num[0]*10000 + num[1]*100
		if len(num) == 3 {
			v.Num += num[2]
		}
	case num[0] < 10 && len(num) == 1:
		// "9" alone: only meaningful in a constraint, as 9.0.
		v.Num = num[0] * 10000
	default:
		return Version{}, fmt.Errorf("version %q: too many numbers", s)
	}
	if pre != "" && v.Num%100 != 0 {
		return Version{}, fmt.Errorf("version %q: a pre-release has no minor version", s)
	}
	return v, nil
}

// leadingNumbers parses "9.6.24rc1" into [9 6 24] and "rc1".
func leadingNumbers(s string) ([]int, string) {
	var nums []int
	for {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return nums, s
		}
		n, err := strconv.Atoi(s[:i])
		if err != nil {
			return nil, s
		}
		nums = append(nums, n)
		s = s[i:]
		if len(s) < 2 || s[0] != '.' || s[1] < '0' || s[1] > '9' {
			return nums, s
		}
		s = s[1:]
	}
}

// Major is the major version as people write it: "9.6", "15".
func (v Version) Major() string {
	if v.Num >= 100000 {
		return strconv.Itoa(v.Num / 10000)
	}
	return fmt.Sprintf("%d.%d", v.Num/10000, v.Num/100%100)
}

// MajorNum is Num without the minor version (90600, 150000).
func (v Version) MajorNum() int {
	if v.Num >= 100000 {
		return v.Num / 10000 * 10000
	}
	return v.Num / 100 * 100
}

// String returns the text parsed, or the major version when there is none.
func (v Version) String() string {
	if v.Text != "" {
		return v.Text
	}
	return v.Major()
}

// Constraint is a conjunction of comparisons with versions: "<10",
// ">=9.6 <13", ">=16". A constraint version names a major version or a
// release ("9.6", "15", "15.4"); "<10" means every 9.x, pre-releases of 10
// included, since a pre-release counts as its first release.
type Constraint struct {
	terms []term
	text  string
}

type term struct {
	op  string
	num int
}

// ParseConstraint parses space- or comma-separated comparisons, each an
// operator (<, <=, >, >=, =) followed by a version.
func ParseConstraint(s string) (Constraint, error) {
	c := Constraint{text: strings.TrimSpace(s)}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
	if len(fields) == 0 {
		return c, fmt.Errorf("version constraint %q is empty (want e.g. \"<10\" or \">=9.6 <13\")", s)
	}
	for _, f := range fields {
		op := ""
		for _, o := range []string{"<=", ">=", "<", ">", "="} {
			if strings.HasPrefix(f, o) {
				op = o
				break
			}
		}
		if op == "" {
			return c, fmt.Errorf("version constraint %q: %q has no operator (use <, <=, >, >= or =, e.g. \"<10\")", s, f)
		}
		v, err := Parse(f[len(op):])
		if err != nil || v.Pre != "" {
			return c, fmt.Errorf("version constraint %q: %q is not a version like 9.6, 10 or 15.4", s, f[len(op):])
		}
		c.terms = append(c.terms, term{op: op, num: v.Num})
	}
	return c, nil
}

// Allows reports whether v satisfies every comparison. "=15" matches
// every 15.x; "=15.4" only 15.4.
func (c Constraint) Allows(v Version) bool {
	for _, t := range c.terms {
		n := v.Num
		var ok bool
		switch t.op {
		case "<":
			ok = n < t.num
		case "<=":
			ok = n <= t.num || sameMajorRelease(t.num, v)
		case ">":
			ok = n > t.num && !sameMajorRelease(t.num, v)
		case ">=":
			ok = n >= t.num
		case "=":
			ok = n == t.num || sameMajorRelease(t.num, v)
		}
		if !ok {
			return false
		}
	}
	return true
}

// sameMajorRelease reports whether num names a major version (no minor)
// and v is a release of it: "<=15" and "=15" include 15.18, ">15" does not.
func sameMajorRelease(num int, v Version) bool {
	major := Version{Num: num}
	return major.MajorNum() == num && v.MajorNum() == num
}

// String returns the constraint as written.
func (c Constraint) String() string { return c.text }
