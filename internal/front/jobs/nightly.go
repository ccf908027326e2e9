package jobs

import (
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/robfig/cron/v3"

	"github.com/pgbisect/pgbisect/internal/app"
	"github.com/pgbisect/pgbisect/internal/app/nightly"
)

// Aligned makes a schedule's ticks the same on every machine: a cron
// expression's are, but robfig's "@every D" counts from the moment it is
// asked, so it is replaced by multiples of D since the Unix epoch.
func Aligned(s nightly.Schedule) nightly.Schedule {
	if c, ok := s.(cron.ConstantDelaySchedule); ok {
		return every(c.Delay)
	}
	return s
}

type every time.Duration

func (e every) Next(t time.Time) time.Time {
	d := time.Duration(e)
	return t.Truncate(d).Add(d)
}

// Tick is the schedule's last tick at or before now: the tick a nightly job
// enqueued now is for. River's periodic scheduler enqueues a little after
// the tick, and a new leader enqueues at once (RunOnStart), so a tick
// missed during a change of leader is caught up, and a tick enqueued twice
// is one job (unique arguments).
func Tick(s nightly.Schedule, now time.Time) time.Time {
	for w := time.Hour; w <= 2*366*24*time.Hour; w *= 2 {
		t := s.Next(now.Add(-w))
		if t.After(now) {
			continue
		}
		for {
			n := s.Next(t)
			if n.After(now) {
				return t
			}
			t = n
		}
	}
	return now.Truncate(time.Second)
}

// NightlyJob is the nightly pass of class for the tick at or before now.
func NightlyJob(s nightly.Schedule, class string, now time.Time, req app.NightlyRequest) (river.JobArgs, *river.InsertOpts) {
	tick := Tick(s, now).UTC()
	return Args[app.NightlyRequest]{
		Common:  Common{Key: fmt.Sprintf("nightly-%s-%s", class, tick.Format("20060102T150405Z")), Class: class},
		Tick:    tick,
		Request: req,
	}, insertOpts(req.Kind(), class)
}
