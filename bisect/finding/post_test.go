package finding

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/pgbisect/pgbisect/bench/stats"
)

// TestTargetKeys: one key per culprit (a range by its ends), a follow-up
// on its culprit's branch, none for a finding without culprits; Unposted
// leaves out the keys with a post.
func TestTargetKeys(t *testing.T) {
	a := Commit{Hash: "9f8377f7a27bbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}
	b := Commit{Hash: "faff8f8e47faaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}
	c := Commit{Hash: "0123456789abcdef0123456789abcdef01234567"}
	f := &Finding{ID: "x", Kind: Regression, Branch: "master", Culprits: []Culprit{{Commit: a}, {Commit: c, Range: []Commit{b, c}}}}
	want := []string{"[master] 9f8377f7a2:", "[master] faff8f8e47..0123456789:"}
	if got := TargetKeys(f); !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
	if got := Unposted(f, []Post{{Key: want[0], Action: ActionCreated}}); !slices.Equal(got, want[1:]) {
		t.Errorf("unposted %q, want %q", got, want[1:])
	}
	f.FollowUp = &FollowUp{Culprit: a, Branch: "REL_16_STABLE"}
	if got := TargetKeys(f); !slices.Equal(got, []string{"[REL_16_STABLE] 9f8377f7a2:"}) {
		t.Errorf("follow-up keys %q", got)
	}
	if got := TargetKeys(&Finding{ID: "y", Kind: NoRegression, Branch: "master"}); got != nil {
		t.Errorf("a finding without culprits has keys %q", got)
	}
}

// TestDirectionJSON: findings write the direction as words, and bisection
// states saved with the old numeric direction still read.
func TestDirectionJSON(t *testing.T) {
	data, err := Marshal(&Finding{ID: "x", Kind: NoRegression, Direction: stats.HigherIsBetter})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Unmarshal(data)
	if err != nil || f.Direction != stats.HigherIsBetter {
		t.Fatalf("round trip: %q, %v\n%s", f.Direction, err, data)
	}
	for in, want := range map[string]stats.Direction{`0`: stats.LowerIsBetter, `1`: stats.HigherIsBetter, `"higher-is-better"`: stats.HigherIsBetter, `""`: ""} {
		var d stats.Direction
		if err := json.Unmarshal([]byte(in), &d); err != nil || d != want {
			t.Errorf("%s: %q, %v; want %q", in, d, err, want)
		}
	}
	var d stats.Direction
	if err := json.Unmarshal([]byte(`"sideways"`), &d); err == nil {
		t.Error("an unknown direction was accepted")
	}
}
