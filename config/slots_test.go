package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// In-flight and shadow limits: what validation accepts, the default slot
// lease, and every unsupported combination refused with its field named.
func TestInFlightAndShadowValidation(t *testing.T) {
	const head = `
upstreams:
  - {name: up, flavor: openai, base_url: "http://127.0.0.1:1", timeout: 2m}
limits:
`
	ok, err := Parse([]byte(head + `  - {name: c, scope: key, unit: concurrent, max: 4}
  - {name: s, scope: user, unit: tokens, rate: 100, per: 1m, shadow: true}
  - {name: sc, scope: tenant, unit: concurrent, max: 2, slot_lease: 1h, shadow: true}
`))
	if err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	if got := time.Duration(ok.Limits[0].SlotLease); got != 2*time.Minute+30*time.Second {
		t.Errorf("default slot_lease = %v, want the upstream timeout 2m plus 30s", got)
	}
	if !ok.Limits[1].Shadow || time.Duration(ok.Limits[2].SlotLease) != time.Hour {
		t.Errorf("shadow or slot_lease not kept: %+v", ok.Limits)
	}

	for _, tc := range []struct{ name, limit, field string }{
		{"no max", `{name: c, scope: key, unit: concurrent}`, "limits[0].max"},
		{"a fraction", `{name: c, scope: key, unit: concurrent, max: 1.5}`, "limits[0].max"},
		{"too many", `{name: c, scope: key, unit: concurrent, max: 100001}`, "limits[0].max"},
		{"lease shorter than the upstream timeout", `{name: c, scope: key, unit: concurrent, max: 2, slot_lease: 1m}`, "limits[0].slot_lease"},
		{"lease too long", `{name: c, scope: key, unit: concurrent, max: 2, slot_lease: 25h}`, "limits[0].slot_lease"},
		{"a rate too", `{name: c, scope: key, unit: concurrent, max: 2, rate: 5, per: 1s}`, "limits[0]"},
		{"a quota too", `{name: c, scope: key, unit: concurrent, max: 2, quota: 5, period: day}`, "limits[0]"},
		{"shards", `{name: c, scope: global, unit: concurrent, max: 20, shards: 4}`, "limits[0].shards"},
		{"a lease", `{name: c, scope: tenant, unit: concurrent, max: 20, lease: {size: 2}}`, "limits[0].lease"},
		{"regions", `{name: c, scope: global, unit: concurrent, max: 20, regions: {eu: 0.5}}`, "limits[0].regions"},
		{"max on a token limit", `{name: c, scope: key, unit: tokens, rate: 5, per: 1s, max: 3}`, "limits[0]"},
		{"slot_lease on a token limit", `{name: c, scope: key, unit: tokens, rate: 5, per: 1s, slot_lease: 1h}`, "limits[0]"},
		{"a sharded shadow", `{name: c, scope: global, unit: tokens, rate: 500, per: 1s, shards: 4, shadow: true}`, "limits[0].shards"},
		{"a leased shadow", `{name: c, scope: tenant, unit: tokens, rate: 500, per: 1s, lease: {size: 10}, shadow: true}`, "limits[0].lease"},
		{"an algorithm on an in-flight limit", `{name: c, scope: key, unit: concurrent, max: 2, algorithm: sliding_window}`, "limits[0].algorithm"},
		{"a waiting shadow", `{name: c, scope: key, unit: tokens, rate: 500, per: 1s, on_limit: wait, shadow: true}`, "limits[0].on_limit"},
	} {
		_, err := Parse([]byte(head + "  - " + tc.limit + "\n"))
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%s: err = %v, want a *config.Error", tc.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%s: %v\ndoes not name %s", tc.name, err, tc.field)
		}
	}
}
