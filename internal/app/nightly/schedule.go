package nightly

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule says when the nightly pass runs. robfig/cron's Schedule
// satisfies it; tests use a schedule that fires within seconds.
type Schedule interface {
	// Next returns the first time after t at which the pass should run.
	Next(t time.Time) time.Time
}

// ParseSchedule parses a robfig/cron spec in the standard five-field form
// ("0 2 * * *"), a descriptor ("@daily", "@every 6h") or either prefixed
// with CRON_TZ=Zone. A spec without CRON_TZ is read in the time zone tz
// (IANA name; "" means UTC), so "0 2 * * *" with tz Europe/Berlin runs at
// 02:00 Berlin time across daylight-saving changes.
func ParseSchedule(spec, tz string) (Schedule, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, fmt.Errorf("nightly.schedule is empty: give a cron spec such as \"0 2 * * *\"")
	}
	if tz == "" {
		tz = "UTC"
	}
	if !strings.HasPrefix(spec, "CRON_TZ=") && !strings.HasPrefix(spec, "TZ=") {
		if _, err := time.LoadLocation(tz); err != nil {
			return nil, fmt.Errorf("nightly.time_zone %q: %w", tz, err)
		}
		spec = "CRON_TZ=" + tz + " " + spec
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("nightly.schedule %q: %w (use five fields: minute hour day-of-month month day-of-week, e.g. \"0 2 * * *\", or @daily, @every 6h)", spec, err)
	}
	return s, nil
}
