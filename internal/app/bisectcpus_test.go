package app

import (
	"context"
	"testing"

	"github.com/pgbisect/pgbisect/bench"
	"github.com/pgbisect/pgbisect/store/storetest"
)

// TestBisectReportShowsPinning: a finding whose samples ran pinned (the
// scenario's cpus:) says where, and one that did not says nothing.
func TestBisectReportShowsPinning(t *testing.T) {
	st := storetest.Store(t)
	ctx := context.Background()
	m := &bisectMeasurer{results: st, id: "cpus-" + t.Name(), env: &bench.Environment{CPUs: &bench.Placement{Server: "1", Client: "0"}}}
	if got := m.environment(ctx).Extra["cpus"]; got != "server on 1, pgbisect and clients on 0" {
		t.Errorf("pinned: cpus %q", got)
	}
	m.env = &bench.Environment{}
	if got, ok := m.environment(ctx).Extra["cpus"]; ok {
		t.Errorf("not pinned: cpus %q", got)
	}
}
