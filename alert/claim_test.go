package alert

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/redistest"
)

// RedisClaimer on a real Redis Cluster: a crossing is claimed once, its
// key under a hash tag of its own (one slot, spread over the cluster),
// expiring an hour after the period's end.
func TestRedisClaimerOnCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	now := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cl := c.Client()
	rc := &RedisClaimer{Client: cl, Now: func() time.Time { return now }}
	ctx := context.Background()
	ids := []string{crossingID("q:acme", now, 1e6, 0.5), crossingID("q:acme", now, 1e6, 0.8), crossingID("q:globex", now, 1e6, 0.5)}
	for _, id := range ids {
		for i, want := range []bool{true, false} {
			ok, err := rc.Claim(ctx, id, end)
			if err != nil || ok != want {
				t.Fatalf("claim %q #%d: %v %v, want %v", id, i, ok, err, want)
			}
		}
		key := ClaimKey(id)
		if !strings.HasPrefix(key, "llmguard:alert:{") || !strings.HasSuffix(key, "}") {
			t.Errorf("key %q has no hash tag", key)
		}
		ttl := cl.PTTL(ctx, key).Val()
		if want := end.Sub(now) + ClaimGrace; ttl <= want-time.Minute || ttl > want {
			t.Errorf("TTL %v, want about %v", ttl, want)
		}
	}
}
