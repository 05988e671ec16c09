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
