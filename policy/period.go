package policy

import "time"

// Period is a quota's calendar period.
type Period uint8

// Periods a quota may use.
const (
	PeriodDay   Period = iota + 1 // from midnight to midnight
	PeriodWeek                    // ISO 8601 week: from Monday 00:00
	PeriodMonth                   // from 00:00 on the 1st
)

// Window returns the period containing now, as [start, end), with both
// boundaries at midnight in loc. Boundaries are computed on the calendar
// (time.Date), so a day with a daylight-saving change lasts 23 or 25 hours
// and a month 28 to 31 days. loc nil means UTC.
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

// String is the period's config name.
func (p Period) String() string {
	switch p {
	case PeriodDay:
		return "day"
	case PeriodWeek:
		return "week"
	case PeriodMonth:
		return "month"
	}
	return ""
}

func parsePeriod(s string) Period {
	switch s {
	case "day":
		return PeriodDay
	case "week":
		return PeriodWeek
	case "month":
		return PeriodMonth
	}
	return 0
}
