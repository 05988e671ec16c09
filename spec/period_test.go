package spec

import (
	"testing"
	"time"
)

func TestPeriodWindows(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	ny, _ := time.LoadLocation("America/New_York")
	at := func(s string, loc *time.Location) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name       string
		p          Period
		now        time.Time
		loc        *time.Location
		start, end time.Time
		length     time.Duration
	}{
		{"february of a leap year", PeriodMonth, at("2028-02-15 12:00", time.UTC), time.UTC,
			at("2028-02-01 00:00", time.UTC), at("2028-03-01 00:00", time.UTC), 29 * 24 * time.Hour},
		{"february of a common year", PeriodMonth, at("2027-02-28 23:59", time.UTC), time.UTC,
			at("2027-02-01 00:00", time.UTC), at("2027-03-01 00:00", time.UTC), 28 * 24 * time.Hour},
		{"december rolls into the next year", PeriodMonth, at("2026-12-31 23:00", time.UTC), time.UTC,
			at("2026-12-01 00:00", time.UTC), at("2027-01-01 00:00", time.UTC), 31 * 24 * time.Hour},
		{"month in Paris across the March DST change", PeriodMonth, at("2027-03-30 10:00", paris), paris,
			at("2027-03-01 00:00", paris), at("2027-04-01 00:00", paris), 31*24*time.Hour - time.Hour},
		{"the 23-hour day in New York", PeriodDay, at("2027-03-14 12:00", ny), ny,
			at("2027-03-14 00:00", ny), at("2027-03-15 00:00", ny), 23 * time.Hour},
		{"the 25-hour day in Paris", PeriodDay, at("2027-10-31 12:00", paris), paris,
			at("2027-10-31 00:00", paris), at("2027-11-01 00:00", paris), 25 * time.Hour},
		{"ISO week from a Sunday", PeriodWeek, at("2026-11-29 22:00", time.UTC), time.UTC,
			at("2026-11-23 00:00", time.UTC), at("2026-11-30 00:00", time.UTC), 7 * 24 * time.Hour},
		{"ISO week from a Monday at midnight", PeriodWeek, at("2026-11-30 00:00", time.UTC), time.UTC,
			at("2026-11-30 00:00", time.UTC), at("2026-12-07 00:00", time.UTC), 7 * 24 * time.Hour},
		{"UTC midnight is not Paris midnight", PeriodDay, at("2026-11-30 23:30", time.UTC), paris,
			at("2026-12-01 00:00", paris), at("2026-12-02 00:00", paris), 24 * time.Hour},
	} {
		start, end := tc.p.Window(tc.now, tc.loc)
		if !start.Equal(tc.start) || !end.Equal(tc.end) {
			t.Errorf("%s: [%v, %v), want [%v, %v)", tc.name, start, end, tc.start, tc.end)
		}
		if end.Sub(start) != tc.length {
			t.Errorf("%s: lasts %v, want %v", tc.name, end.Sub(start), tc.length)
		}
		if tc.now.Before(start) || !tc.now.Before(end) {
			t.Errorf("%s: now %v outside its window", tc.name, tc.now)
		}
	}
}
