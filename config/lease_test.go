package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
)

func leaseDoc(limit string) []byte {
	return []byte("upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\nlimits:\n  - " + limit + "\n")
}

// A lease parses with its size in the limit's units and a default TTL.
func TestLeaseParses(t *testing.T) {
	c, err := config.Parse(leaseDoc("{name: g, scope: global, unit: usd, rate: 10, per: 1m, burst: 20, lease: {size: 0.5}}"))
	if err != nil {
		t.Fatal(err)
	}
	ls := c.Limits[0].Lease
	if ls == nil || ls.Size != 0.5 || time.Duration(ls.TTL) != config.DefaultLeaseTTL {
		t.Fatalf("lease %+v, want size 0.5 and the default ttl", ls)
	}
	c, err = config.Parse(leaseDoc("{name: g, scope: global, unit: tokens, rate: 100, per: 1s, lease: {size: 100, ttl: 10s}}"))
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(c.Limits[0].Lease.TTL) != 10*time.Second {
		t.Errorf("ttl %v, want 10s", c.Limits[0].Lease.TTL)
	}
	if c, _ := config.Parse(leaseDoc("{name: g, scope: global, unit: tokens, rate: 100, per: 1s}")); c.Limits[0].Lease != nil {
		t.Errorf("a limit without lease: got %+v", c.Limits[0].Lease)
	}
}

// Every bad lease is refused, naming its field and saying why.
func TestLeaseValidation(t *testing.T) {
	for _, tc := range []struct{ limit, want string }{
		{"{name: g, scope: global, unit: tokens, rate: 100, per: 1s, lease: {size: 0}}", "limits[0].lease.size: must be a positive number of units"},
		{"{name: g, scope: global, unit: tokens, rate: 100, per: 1s, lease: {size: -5}}", "limits[0].lease.size: must be a positive number of units"},
		{"{name: g, scope: global, unit: tokens, rate: 100, per: 1s, lease: {size: 0.5}}", "limits[0].lease.size: must hold at least one unit"},
		{"{name: g, scope: global, unit: tokens, rate: 100, per: 1s, burst: 50, lease: {size: 51}}", "limits[0].lease.size: must be at most the burst (50): a lease is taken as one take"},
		{"{name: g, scope: global, unit: usd, rate: 1, per: 1s, lease: {size: 1.5}}", "limits[0].lease.size: must be at most the burst (1)"},
		{"{name: g, scope: global, unit: tokens, rate: 100, per: 1s, lease: {size: 10, ttl: 5ms}}", "limits[0].lease.ttl: must be from 10ms to 10s (got 5ms)"},
		{"{name: g, scope: global, unit: tokens, rate: 100, per: 1s, lease: {size: 10, ttl: 11s}}", "limits[0].lease.ttl: must be from 10ms to 10s (got 11s)"},
		{"{name: g, scope: global, unit: tokens, rate: 100, per: 1s, lease: {size: 10, ttl: soon}}", "limits[0].lease.ttl: `soon` is not a Go duration"},
		{"{name: g, scope: global, unit: usd, quota: 500, period: month, lease: {size: 1}}", "limits[0].lease: leases apply to token buckets (rate/burst) only, not to a quota"},
		{"{name: g, scope: global, unit: tokens, rate: 100, per: 1s, lease: {size: 10, every: 1s}}", "unknown field every; this section takes: size, ttl"},
	} {
		_, err := config.Parse(leaseDoc(tc.limit))
		var ce *config.Error
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v\nwant a problem containing %q", tc.limit, err, tc.want)
		} else if !errors.As(err, &ce) && !strings.Contains(tc.want, "unknown field") {
			t.Errorf("%s: err %T, want *config.Error", tc.limit, err)
		}
	}
}

// TestLeaseOnlyTenantOrGlobal: a lease on a key's or a user's limit is
// refused (its per-bucket state would grow with the callers).
func TestLeaseOnlyTenantOrGlobal(t *testing.T) {
	for _, scope := range []string{"key", "user"} {
		_, err := config.Parse([]byte(`
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1"}]
store: {backend: redis, redis_url: "redis://127.0.0.1:1/0"}
limits:
  - {name: l, scope: ` + scope + `, unit: tokens, rate: 1000, per: 1s, lease: {size: 10}}
`))
		if err == nil || !strings.Contains(err.Error(), "limits[0].lease") || !strings.Contains(err.Error(), "tenant and global") {
			t.Errorf("scope %s: err = %v, want limits[0].lease refused", scope, err)
		}
	}
}
