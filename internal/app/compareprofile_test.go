package app

import (
	"testing"

	"github.com/pgbisect/pgbisect/bench"
)

func TestFlameGraphPath(t *testing.T) {
	if got := flameGraphPath("f.svg", bench.Point{Vars: map[string]string{"clients": "4"}}, 2); got != "f-clients4.svg" {
		t.Errorf("two points: %q, want f-clients4.svg", got)
	}
	if got := flameGraphPath("f.svg", bench.Point{}, 1); got != "f.svg" {
		t.Errorf("one point: %q, want f.svg", got)
	}
}
