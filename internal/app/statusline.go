package app

import (
	"fmt"
	"time"

	"github.com/pgbisect/pgbisect/bisect"
)

// statusLine is a bisection's status in a few words, for the status line a
// terminal updates in place (Event.Short of a status event): phase,
// candidates left, builds, samples, time spent and left, what is being
// done.
func statusLine(s bisect.Status) string {
	left := fmt.Sprintf("%d–%d samples left", s.Left.SamplesLo, s.Left.SamplesHi)
	if s.Left.PerSample > 0 {
		left = fmt.Sprintf("%s–%s left", shortDuration(s.Left.TimeLo()), shortDuration(s.Left.TimeHi()))
	}
	what := s.Step + " " + s.Commit.Short()
	if s.Against != nil {
		what += " vs " + s.Against.Short()
	}
	if s.Of > 0 {
		what += fmt.Sprintf(" %d/%d", s.Done+1, s.Of)
	}
	if s.Point != "" && s.Step == "sample" {
		what += " at " + s.Point
	}
	return fmt.Sprintf("[%s] %d candidates left · %d builds · %d samples · %s elapsed, %s · %s",
		s.Phase, s.RangeLeft, s.Builds, s.Samples, shortDuration(s.Elapsed), left, what)
}

// shortDuration rounds d to seconds under ten minutes, to minutes above.
func shortDuration(d time.Duration) time.Duration {
	if d < 10*time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Minute)
}
