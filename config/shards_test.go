package config

import (
	"strings"
	"testing"
	"time"
)

// shards: a limit is unsharded by default; a shard count must be a whole
// number from 1 to MaxShards that leaves every shard at least one unit of
// burst (quota) and of rate, and each refusal says why.
func TestShardsValidation(t *testing.T) {
	const head = "upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\nlimits:\n"
	for _, tc := range []struct {
		name  string
		limit string
		want  string // "" when valid
	}{
		{"unset is one shard", "{name: l, scope: global, unit: tokens, rate: 100, per: 1s}", ""},
		{"explicit one", "{name: l, scope: global, unit: tokens, rate: 100, per: 1s, shards: 1}", ""},
		{"largest", "{name: l, scope: global, unit: tokens, rate: 1000, per: 1s, shards: 256}", ""},
		{"as many as units", "{name: l, scope: tenant, unit: requests, rate: 4, per: 1s, shards: 4}", ""},
		{"usd counts micro-dollars", "{name: l, scope: global, unit: usd, rate: 0.001, per: 1s, shards: 256}", ""},
		{"quota", "{name: l, scope: tenant, unit: usd, quota: 10, period: month, shards: 8}", ""},
		{"too many", "{name: l, scope: global, unit: tokens, rate: 1000, per: 1s, shards: 257}", "limits[0].shards: must be a whole number of shards from 1 to 256 (got 257)"},
		{"negative", "{name: l, scope: global, unit: tokens, rate: 1000, per: 1s, shards: -2}", "limits[0].shards: must be a whole number"},
		// A fraction or text is named with its line and value, as in every
		// whole-number field; a number written whole is read (trial2: 2.0
		// was refused with "got a number with a fraction, or no number").
		{"not whole", "{name: l, scope: global, unit: tokens, rate: 1000, per: 1s, shards: 2.5}", "line 3: limits[0].shards: `2.5` is not a whole number (write 2 or 3)"},
		{"text", "{name: l, scope: global, unit: tokens, rate: 1000, per: 1s, shards: two}", "line 3: limits[0].shards: `two` is not a whole number"},
		{"written whole", "{name: l, scope: global, unit: tokens, rate: 1000, per: 1s, shards: 2.0}", ""},
		{"exponent", "{name: l, scope: global, unit: tokens, rate: 1000, per: 1s, shards: 1e1}", ""},
		{"burst below shards", "{name: l, scope: global, unit: tokens, rate: 100, per: 1s, burst: 3, shards: 4}",
			"limits[0].shards: 4 shards of a burst of 3 units would each hold less than one unit: use shards: 3 or fewer"},
		{"rate below shards", "{name: l, scope: global, unit: requests, rate: 2, per: 1s, burst: 100, shards: 4}",
			"limits[0].shards: 4 shards of a rate of 2 units per 1s would each refill less than one unit per period: use shards: 2 or fewer"},
		{"quota below shards", "{name: l, scope: global, unit: requests, quota: 5, period: day, shards: 6}",
			"limits[0].shards: 6 shards of a quota of 5 units would each allow less than one unit: use shards: 5 or fewer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(head + "  - " + tc.limit + "\n"))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Limits[0].Shards < 1 {
					t.Fatalf("shards %d after defaults, want at least 1", c.Limits[0].Shards)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// store.deny_cache: 100ms when unset, 0 turns it off, and it is a duration
// from 0 to 10s.
func TestDenyCacheValidation(t *testing.T) {
	const head = "upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\n"
	for _, tc := range []struct {
		store string
		want  time.Duration
		err   string
	}{
		{"", 100 * time.Millisecond, ""},
		{"store: {deny_cache: 0}", 0, ""},
		{"store: {deny_cache: 0s}", 0, ""},
		{"store: {deny_cache: 250ms}", 250 * time.Millisecond, ""},
		{"store: {deny_cache: 10s}", 10 * time.Second, ""},
		{"store: {deny_cache: 11s}", 0, "store.deny_cache: must be at most 10s"},
		{"store: {deny_cache: -1ms}", 0, "store.deny_cache: must be positive"},
		{"store: {deny_cache: soon}", 0, "store.deny_cache: `soon` is not a Go duration"},
	} {
		c, err := Parse([]byte(head + tc.store + "\n"))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.store, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.store, err)
			continue
		}
		if got := time.Duration(*c.Store.DenyCache); got != tc.want {
			t.Errorf("%q: deny_cache %v, want %v", tc.store, got, tc.want)
		}
	}
}

// TestShardsNotWithRegions: a limit split by regions cannot also be
// sharded (its shard keys would not name the region).
func TestShardsNotWithRegions(t *testing.T) {
	_, err := Parse([]byte(`
region: eu
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1"}]
store: {backend: redis, redis_url: "redis://127.0.0.1:1/0"}
limits:
  - {name: g, scope: global, unit: tokens, rate: 1000, per: 1s, shards: 4, regions: {eu: 0.5, us: 0.5}}
`))
	if err == nil || !strings.Contains(err.Error(), "limits[0].shards") || !strings.Contains(err.Error(), "regions") {
		t.Fatalf("err = %v, want limits[0].shards refused with regions", err)
	}
}

// store.health_check: 5s when unset, 0 turns the idle probe off, and it
// is a duration of at least 0.
func TestHealthCheckValidation(t *testing.T) {
	const head = "upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\n"
	for _, tc := range []struct {
		store string
		want  time.Duration
		err   string
	}{
		{"", 5 * time.Second, ""},
		{"store: {health_check: 0}", 0, ""},
		{"store: {health_check: 250ms}", 250 * time.Millisecond, ""},
		{"store: {health_check: -1s}", 0, "store.health_check: must be positive"},
		{"store: {health_check: often}", 0, "store.health_check: `often` is not a Go duration"},
	} {
		c, err := Parse([]byte(head + tc.store + "\n"))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.store, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.store, err)
			continue
		}
		if got := time.Duration(*c.Store.HealthCheck); got != tc.want {
			t.Errorf("%q: health_check %v, want %v", tc.store, got, tc.want)
		}
	}
}

// Two files that say the same in other words (comments, spacing, key
// order, a default spelt out) have one fingerprint; any setting that
// differs changes it.
func TestFingerprint(t *testing.T) {
	const a = "upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\nstore: {timeout: 50ms}\n"
	const b = "# the same\nstore:\n  timeout: 50ms   # the default\nupstreams:\n  - {base_url: \"http://x\", flavor: openai, name: o}\n"
	const c = "upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\nstore: {timeout: 60ms}\n"
	fp := func(s string) string {
		cfg, err := Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Fingerprint()
	}
	if fa, fb := fp(a), fp(b); fa != fb || len(fa) != 64 {
		t.Errorf("same settings: %q and %q", fa, fb)
	}
	if fp(a) == fp(c) {
		t.Error("store.timeout 50ms and 60ms have one fingerprint")
	}
}
