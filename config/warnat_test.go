package config

import (
	"errors"
	"slices"
	"testing"
)

// warn_at: each threshold is refused once, for what is wrong with it — out
// of (0, 1] (a percentage is told the fraction to write) or not above the
// threshold before it — and a valid one after a refused one is not refused
// for it (trial2: [80, 0.95] reported 0.95 as well).
func TestWarnAtProblemsNamedOnce(t *testing.T) {
	const head = "upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\nlimits:\n  - {name: b, scope: tenant, unit: usd, quota: 5, period: month, warn_at: "
	for _, tc := range []struct {
		warnAt string
		want   []string // nil: valid
	}{
		{"[0.5, 0.8, 1]", nil},
		{"[80, 0.95]", []string{"line 3: limits[0].warn_at[0]: must be a fraction of the quota in (0, 1] (got 80) (write 0.8 for 80%)"}},
		{"[0.8, 0.5]", []string{"line 3: limits[0].warn_at[1]: must be above the threshold before it (0.8), in increasing order (got 0.5)"}},
		{"[0.8, 0.8]", []string{"line 3: limits[0].warn_at[1]: must be above the threshold before it (0.8), in increasing order (got 0.8)"}},
		{"[0, 1.5e3]", []string{
			"line 3: limits[0].warn_at[0]: must be a fraction of the quota in (0, 1] (got 0)",
			"line 3: limits[0].warn_at[1]: must be a fraction of the quota in (0, 1] (got 1500)",
		}},
	} {
		_, err := Parse([]byte(head + tc.warnAt + "}\n"))
		var ce *Error
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("warn_at: %s: %v", tc.warnAt, err)
		case tc.want != nil && (!errors.As(err, &ce) || !slices.Equal(ce.Problems, tc.want)):
			t.Errorf("warn_at: %s: err = %v, want exactly %q", tc.warnAt, err, tc.want)
		}
	}
}

// The webhook's thresholds and a quota's time zone, as a newcomer writes
// them (trial27): thresholds as percentages are told the fraction, as
// warn_at is, and "utc" (Go's zone names are case-sensitive) is told UTC.
func TestThresholdPercentAndZoneCase(t *testing.T) {
	const head = "upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\nlimits:\n  - {name: b, scope: tenant, unit: usd, quota: 5, period: month, timezone: "
	for _, tc := range []struct {
		zone, thresholds string
		want             []string // nil: valid
	}{
		{"UTC", "[0.5, 1, 2]", nil},
		{"UTC", "[50, 80]", []string{
			"line 4: alerts.webhook.thresholds[0]: must be a fraction of the quota in (0, 10] (got 50) (write 0.5 for 50%)",
			"line 4: alerts.webhook.thresholds[1]: must be a fraction of the quota in (0, 10] (got 80) (write 0.8 for 80%)",
		}},
		{"UTC", "[0.5, 2000]", []string{"line 4: alerts.webhook.thresholds[1]: must be a fraction of the quota in (0, 10] (got 2000)"}},
		{"utc", "[0.5]", []string{`line 3: limits[0].timezone: unknown time zone "utc" (want an IANA name such as UTC or Europe/Paris) (did you mean UTC?)`}},
		{"PST", "[0.5]", []string{`line 3: limits[0].timezone: unknown time zone "PST" (want an IANA name such as UTC or Europe/Paris)`}},
	} {
		cfg := head + tc.zone + "}\nalerts: {webhook: {url: \"http://h/x\", thresholds: " + tc.thresholds + "}}\n"
		_, err := Parse([]byte(cfg))
		var ce *Error
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s %s: %v", tc.zone, tc.thresholds, err)
		case tc.want != nil && (!errors.As(err, &ce) || !slices.Equal(ce.Problems, tc.want)):
			t.Errorf("%s %s: err = %v, want exactly %q", tc.zone, tc.thresholds, err, tc.want)
		}
	}
}
