package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgbisect/pgbisect/bisect"
)

// TestDemoVerdict: the demo passes only when both injected regressions are
// named exactly and nothing else is blamed; otherwise its error says where
// each one ended up, with the figures.
func TestDemoVerdict(t *testing.T) {
	st := &bisect.State{Inputs: bisect.Inputs{Metric: "copy_time"}, Outcome: bisect.OutcomeFound, Summary: "summary", SamplesTaken: 580}
	for i := range 8 {
		st.Commits = append(st.Commits, bisect.Commit{Hash: fmt.Sprintf("%02d%038d", i, i)})
	}
	res := func(ratio, rel float64) *bisect.Result {
		return &bisect.Result{Ratio: ratio, Lo: ratio - 0.05, Hi: ratio + 0.05, P: 0.001, NA: 30, NB: 30, RelA: rel, RelB: rel}
	}
	st.Pairs = []bisect.Pair{{Result: res(1.6, 0.04)}}
	exact := func(i int) bisect.Culprit {
		return bisect.Culprit{Range: bisect.Range{Parent: i - 1, First: i, Last: i, Result: res(1.3, 0.03)}, Candidates: []int{i}}
	}
	injected := []string{st.Commits[2].Hash, st.Commits[5].Hash}
	for _, tt := range []struct {
		name       string
		culprits   []bisect.Culprit
		unresolved []bisect.Range
		want       []string // in the error; none: no error
	}{
		{"both named", []bisect.Culprit{exact(5), exact(2)}, nil, nil},
		{"one in an unresolved range", []bisect.Culprit{exact(5)}, []bisect.Range{{Parent: 0, First: 1, Last: 4, Result: res(1.25, 0.21)}},
			[]string{"injected regression " + st.Commits[2].Hash[:10] + " inside the unresolved range", "copy_time +25.0%", "noise ±21.0% / ±21.0%", "endpoints copy_time +60.0%", "580 samples"}},
		{"one only as a range", []bisect.Culprit{exact(5), {Range: bisect.Range{Parent: 1, First: 2, Last: 3, Result: res(1.3, 0.02)}, Candidates: []int{2, 3}}}, nil,
			[]string{"only inside a culprit range of 2 candidates"}},
		{"a wrong blame", []bisect.Culprit{exact(5), exact(2), exact(6)}, nil,
			[]string{"blamed " + st.Commits[6].Hash[:10] + ", which is not an injected regression"}},
	} {
		st.Culprits, st.Unresolved = tt.culprits, tt.unresolved
		err := demoVerdict(st, injected)
		if len(tt.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
	}
}
