package config

import (
	"strings"
	"testing"
)

// algorithm: token_bucket by default; a window algorithm is a rate limit of
// whole units per window with no burst of its own, and refuses the features
// that need a token bucket, each refusal naming its field.
func TestAlgorithmValidation(t *testing.T) {
	const head = "upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\nregion: eu\nstore: {backend: redis, redis_url: \"redis://127.0.0.1:1/0\"}\nlimits:\n"
	for _, tc := range []struct {
		name  string
		limit string
		want  string // "" when valid
	}{
		{"unset", "{name: l, scope: user, unit: tokens, rate: 100, per: 1s}", ""},
		{"token bucket", "{name: l, scope: user, unit: tokens, rate: 100, per: 1s, burst: 300, algorithm: token_bucket}", ""},
		{"sliding", "{name: l, scope: user, unit: tokens, rate: 100, per: 1m, algorithm: sliding_window}", ""},
		{"fixed", "{name: l, scope: tenant, unit: usd, rate: 2.5, per: 1h, algorithm: fixed_window}", ""},
		{"burst equal to rate", "{name: l, scope: user, unit: requests, rate: 10, burst: 10, per: 1m, algorithm: fixed_window}", ""},
		{"unknown", "{name: l, scope: user, unit: tokens, rate: 100, per: 1s, algorithm: leaky_bucket}",
			`limits[0].algorithm: must be one of token_bucket, sliding_window, fixed_window (got "leaky_bucket")`},
		{"quota", "{name: l, scope: user, unit: tokens, quota: 100, period: day, algorithm: fixed_window}",
			"limits[0].algorithm: fixed_window applies to rate limits (rate: and per:), not to a calendar quota"},
		{"burst", "{name: l, scope: user, unit: tokens, rate: 100, burst: 200, per: 1s, algorithm: sliding_window}",
			"limits[0].burst: sliding_window has no burst"},
		{"fractional", "{name: l, scope: user, unit: requests, rate: 1.5, per: 1s, algorithm: sliding_window}",
			"limits[0].rate: sliding_window counts whole units per window (got 1.5)"},
		{"window over a year", "{name: l, scope: user, unit: requests, rate: 1, per: 9000h, algorithm: fixed_window}",
			"limits[0].per: fixed_window windows are at most"},
		{"shards", "{name: l, scope: global, unit: tokens, rate: 100, per: 1s, shards: 2, algorithm: sliding_window}",
			"limits[0].shards: sliding_window does not combine with shards"},
		{"lease", "{name: l, scope: global, unit: tokens, rate: 100, per: 1s, lease: {size: 10}, algorithm: fixed_window}",
			"limits[0].lease: fixed_window does not combine with a lease"},
		{"regions", "{name: l, scope: global, unit: tokens, rate: 100, per: 1s, regions: {eu: 0.5}, algorithm: sliding_window}",
			"limits[0].regions: sliding_window does not combine with regions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(head + "  - " + tc.limit + "\n"))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
