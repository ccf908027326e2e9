package app

import (
	"context"
	"testing"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/bisect/finding"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestBisectReportShowsPinning: a finding whose samples ran pinned (the
// scenario's cpus:) says where, and one that did not says nothing.
func TestBisectReportShowsPinning(t *testing.T) {
	st := storetest.Store(t)
	ctx := context.Background()
	m := &bisectMeasurer{results: st, id: "cpus-" + t.Name(), env: &bench.Environment{CPUs: &bench.Placement{Server: "1", Client: "0"}}}
	env := func() finding.Environment {
		e, err := m.environment(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if got := env().Extra["cpus"]; got != "server on 1, pgbisect and clients on 0" {
		t.Errorf("pinned: cpus %q", got)
	}
	m.env = &bench.Environment{}
	if got, ok := env().Extra["cpus"]; ok {
		t.Errorf("not pinned: cpus %q", got)
	}
}
