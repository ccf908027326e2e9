package app

import (
	"strings"

	"github.com/pgbisect/pgbisect/bisect/finding"
)

// Milestone is what a follower that shows only an operation's milestones
// makes of one of its events: a GitHub reply edited as the job runs is
// edited only at these, so that a bisection of hours costs a handful of
// edits.
type Milestone struct {
	// Line is the milestone in one line; "" when the event is none.
	Line string
	// End marks the operation's last event (KindDone); Failed when it
	// failed, with Line saying why.
	End, Failed bool
	// Finding is the finding a bisection made, Bisection its ID, Result a
	// comparison's verdicts (at the end).
	Finding, Bisection, Result string
}

// MilestoneOf reads one event as a milestone: a bisection started, its
// endpoints verified, each culprit confirmed, its outcome, and the end of
// any operation, and a bisection's answer, saved before its extras.
func MilestoneOf(e Event) Milestone {
	switch e.Kind {
	case KindStart:
		return Milestone{Line: "started: " + milestoneLine(e.Text), Bisection: e.Bisection}
	case KindEndpoints:
		return Milestone{Line: "endpoints verified: " + e.Text, Bisection: e.Bisection}
	case KindCulprit:
		return Milestone{Line: e.Text, Bisection: e.Bisection}
	case KindOutcome:
		return Milestone{Line: "outcome: " + e.Text, Bisection: e.Bisection}
	case KindAnswer:
		return Milestone{Line: finding.FirstLine(e.Text), Finding: e.Finding, Bisection: e.Bisection}
	case KindDone:
		m := Milestone{End: true, Finding: e.Finding, Bisection: e.Bisection, Result: e.Result, Line: "done"}
		if e.Error != "" {
			m.Failed, m.Line = true, "failed: "+milestoneLine(e.Error)
		}
		return m
	}
	return Milestone{}
}

// milestoneLine is the first line of an event's text without its resume hint.
func milestoneLine(s string) string {
	s = finding.FirstLine(s)
	if i := strings.Index(s, " (resume with"); i > 0 {
		s = s[:i]
	}
	return s
}
