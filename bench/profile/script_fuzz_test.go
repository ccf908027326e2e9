package profile

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/internal/testkit/fuzztest"
)

// FuzzParseScript feeds ParseScript with perf script output: sample
// headers, frames whose symbol names come from a binary a patch built
// (anyone's code), task events with fork loops. Whatever the bytes: no
// panic, the time bounded, and a profile whose Samples is the sum of its
// stacks, each stack non-empty frames with no ";" inside one; the samples
// kept for a few roots are never more than all of them; and the folded
// output is one line per stack.
func FuzzParseScript(f *testing.F) {
	f.Add([]byte(script), uint16(0))
	f.Add([]byte("postgres     0/0     PERF_RECORD_FORK(200:200):(100:100)\n"+
		"postgres     0/0     PERF_RECORD_FORK(100:100):(200:200)\n"+
		"postgres 100/100 \n\t  1 a;b (/pg/bin/postgres)\n\npostgres 200/200 \n\t  1 +0x1 ( )\n"), uint16(100))
	f.Add([]byte("x 1/1\n\t\n\t  \n\t 1\n\t 1  (/x)\n\t 1 f+0x (x\n"), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, root uint16) {
		var all, some Profile
		var err, err2 error
		fuzztest.Within(t, func() {
			all, err = ParseScript(bytes.NewReader(data), nil)
			some, err2 = ParseScript(bytes.NewReader(data), []int{int(root), int(root) + 100})
		})
		if (err == nil) != (err2 == nil) {
			t.Fatalf("with roots %v, without %v", err2, err)
		}
		if err != nil {
			fuzztest.ShortError(t, err, 0)
			return
		}
		for _, p := range []Profile{all, some} {
			n := 0
			for stack, c := range p.Stacks {
				if c <= 0 {
					t.Errorf("stack %q has %d samples", stack, c)
				}
				n += c
				for _, fr := range strings.Split(stack, ";") {
					if fr == "" || strings.ContainsAny(fr, "\n") {
						t.Errorf("frame %q in stack %q", fr, stack)
					}
				}
			}
			if n != p.Samples {
				t.Errorf("%d samples, the stacks hold %d", p.Samples, n)
			}
			var buf bytes.Buffer
			if err := p.Folded(&buf); err != nil {
				t.Fatal(err)
			}
			if lines := strings.Count(buf.String(), "\n"); lines != len(p.Stacks) {
				t.Errorf("%d folded lines for %d stacks", lines, len(p.Stacks))
			}
		}
		if some.Samples > all.Samples {
			t.Errorf("%d samples kept for roots, %d in all", some.Samples, all.Samples)
		}
	})
}
