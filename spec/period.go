package spec

import "time"

// Period is a quota's calendar period (limits[].period). The zero value,
// PeriodNone, is a limit without one: a token bucket or a window.
type Period uint8

// Periods, shortest first: a tenant's budget page shows the longest of its
// budgets' (max of the values).
const (
	PeriodNone  Period = iota // not a quota
	PeriodDay                 // from midnight to midnight
	PeriodWeek                // ISO 8601 week: from Monday 00:00
	PeriodMonth               // from 00:00 on the 1st
)

// periodNames is the config name of each Period, indexed by its value: the
// one table of periods. PeriodNone has none.
var periodNames = names[Period]{
	PeriodNone:  "",
	PeriodDay:   "day",
	PeriodWeek:  "week",
	PeriodMonth: "month",
}

// String is the period's config name ("" for PeriodNone); a value outside
// the enum is "unknown(<n>)".
func (p Period) String() string { return periodNames.of(p) }

// ParsePeriod returns the Period whose config name is s; false if none is
// (the empty name included: PeriodNone is no period a config can name).
func ParsePeriod(s string) (Period, bool) { return periodNames.parse(s) }

// PeriodNames returns every period's config name, shortest first: "day",
// "week", "month" (a fresh slice the caller may keep).
func PeriodNames() []string { return periodNames.list() }

// Window returns the period containing now, as [start, end), with both
// boundaries at midnight in loc. Boundaries are computed on the calendar
// (time.Date), so a day with a daylight-saving change lasts 23 or 25 hours
// and a month 28 to 31 days. loc nil means UTC; PeriodNone (or a value
// outside the enum) is the day.
func (p Period) Window(now time.Time, loc *time.Location) (start, end time.Time) {
	if loc == nil {
		loc = time.UTC
	}
	t := now.In(loc)
	y, m, d := t.Date()
	switch p {
	case PeriodWeek:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		start = time.Date(y, m, d-back, 0, 0, 0, 0, loc)
		end = time.Date(y, m, d-back+7, 0, 0, 0, 0, loc)
	case PeriodMonth:
		start = time.Date(y, m, 1, 0, 0, 0, 0, loc)
		end = time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	default:
		start = time.Date(y, m, d, 0, 0, 0, 0, loc)
		end = time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
	return start, end
}
