package bench

import (
	"fmt"
	"regexp"
	"strconv"
)

// varKind is what a scenario variable holds, as its default (or its
// matrix values) in the file says: a value set for it from outside the
// file (--set, a request from the web, the API or a GitHub comment) must
// be of the same kind.
//
// The design choice: values set from outside can never carry text that
// means something to SQL or a shell, so the file's templates may splice
// them unquoted into any step. An integer stays an integer, a number a
// number, a boolean true or false; a word (every other variable) is
// letters, digits and _ . : + - and does not start with -: no quote,
// space, semicolon, $, backquote, slash or line break. Text of any other
// shape belongs in the scenario file itself, which is the operator's.
type varKind int

const (
	kindWord varKind = iota
	kindInteger
	kindNumber
	kindBoolean
)

// kindOf is the kind of a value as YAML typed it.
func kindOf(v any) varKind {
	switch v.(type) {
	case int, int64, uint64:
		return kindInteger
	case float64:
		return kindNumber
	case bool:
		return kindBoolean
	}
	return kindWord
}

// join is the kind of a matrix whose values are of kinds k and o.
func (k varKind) join(o varKind) varKind {
	switch {
	case k == o:
		return k
	case (k == kindInteger || k == kindNumber) && (o == kindInteger || o == kindNumber):
		return kindNumber
	}
	return kindWord
}

var (
	numberValue = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]{1,3})?$`)
	wordValue   = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9_.:+-]{0,127})?$`)
)

// check returns v, set from outside the file for variable name, in its
// canonical form, or an error saying what the variable takes.
func (k varKind) check(name, v string) (string, error) {
	switch k {
	case kindInteger:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", fmt.Errorf("--set %s=%q: %s is an integer in the scenario: give an integer such as 100", name, v, name)
		}
		return strconv.FormatInt(n, 10), nil
	case kindNumber:
		if !numberValue.MatchString(v) {
			return "", fmt.Errorf("--set %s=%q: %s is a number in the scenario: give a number such as 0.5", name, v, name)
		}
		return v, nil
	case kindBoolean:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "", fmt.Errorf("--set %s=%q: %s is true or false in the scenario", name, v, name)
		}
		return strconv.FormatBool(b), nil
	}
	if !wordValue.MatchString(v) {
		return "", fmt.Errorf("--set %s=%q: a value set for a variable is a word of at most 128 letters, digits and _ . : + - that does not start with - "+
			"(so that SQL and shell steps can take it as it is): write other text into the scenario file", name, v)
	}
	return v, nil
}
