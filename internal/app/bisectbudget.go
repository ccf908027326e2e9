package app

import (
	"time"

	"github.com/pgbisect/pgbisect/bisect"
)

// bisectBound applies a request's time bound to a bisection being started
// or resumed, and says what follows: a bisection stopped at its bound
// continues when the new bound is longer than the time it spent, and
// stays stopped, with a note saying how to continue, when it is not.
// maxTime 0 keeps the bisection's own bound.
func bisectBound(st *bisect.State, maxTime time.Duration, sink Sink) {
	if maxTime > 0 && maxTime != st.MaxTime {
		if st.SetMaxTime(maxTime, time.Now()) {
			sink.note("bisection %s had stopped at its time bound; continuing with --max-time %s (%s spent)", st.ID, maxTime, st.Spent.Round(time.Second))
			return
		}
	}
	if st.Outcome == bisect.OutcomeTimeBound {
		sink.note("bisection %s stopped at its time bound of %s (%s spent); give a longer --max-time to continue it: pgbisect bisect --resume %s --max-time DURATION",
			st.ID, st.MaxTime, st.Spent.Round(time.Second), st.ID)
	}
}

// bisectBudget tells a person about to wait what the bisection may cost.
func bisectBudget(st *bisect.State, sink Sink) {
	if !st.Done() {
		sink.note("%s", st.Budget())
	}
}
