package app

import (
	"testing"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
)

func TestStatusLine(t *testing.T) {
	c := bisect.Commit{Hash: "1a2b3c4d5e6f", Subject: "copyfrom.c: something"}
	o := bisect.Commit{Hash: "9f8e7d6c5b4a"}
	s := bisect.Status{Phase: bisect.PhaseSearch, Step: "sample", Commit: c, Against: &o, Done: 2, Of: 10,
		RangeLeft: 12, Builds: 3, Samples: 21, Elapsed: 4*time.Minute + 400*time.Millisecond,
		Left: bisect.Estimate{SamplesLo: 10, SamplesHi: 30}}
	if got, want := statusLine(s), "[search] 12 candidates left · 3 builds · 21 samples · 4m0s elapsed, 10–30 samples left · sample 1a2b3c4d5e vs 9f8e7d6c5b 3/10"; got != want {
		t.Errorf("statusLine = %q, want %q", got, want)
	}
	s.Left.PerSample = 30 * time.Second
	s.Step, s.Against, s.Of = "build", nil, 0
	if got, want := statusLine(s), "[search] 12 candidates left · 3 builds · 21 samples · 4m0s elapsed, 5m0s–15m0s left · build 1a2b3c4d5e"; got != want {
		t.Errorf("statusLine = %q, want %q", got, want)
	}
}
