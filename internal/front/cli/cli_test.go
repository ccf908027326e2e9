package cli

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
)

func TestParseFlagsInterspersed(t *testing.T) {
	cases := []struct {
		args    []string
		samples int
		pos     []string
	}{
		{[]string{"REV", "--samples", "5"}, 5, []string{"REV"}},
		{[]string{"--samples", "3", "A", "B"}, 3, []string{"A", "B"}},
		{[]string{"A", "--", "--samples"}, 0, []string{"A", "--samples"}},
	}
	for _, c := range cases {
		env := &Env{Args: c.args, Stderr: &bytes.Buffer{}}
		fs := newFlags(env, "run", "")
		n := fs.Int("samples", 0, "")
		pos, err := parseFlags(fs, env)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if *n != c.samples || !reflect.DeepEqual(pos, c.pos) {
			t.Errorf("%v: samples=%d pos=%q, want %d %q", c.args, *n, pos, c.samples, c.pos)
		}
	}
}

func TestUnknownCommandSuggests(t *testing.T) {
	register(command{Name: "zzbuild", Summary: "test", Run: func(context.Context, *Env) error { return nil }})
	defer delete(commands, "zzbuild")
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"zzbiuld"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), `did you mean "zzbuild"?`) {
		t.Fatalf("code %d, stderr %q", code, errb.String())
	}
}
