package bucket_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
	"github.com/llmguard/llmguard/internal/redistest"
)

// An in-flight limit's key lives as long as its longest-lived holder:
// when a reload shortens the slot lease, a hold under the new lease must
// not cut the key's TTL short of the holders taken under the old one.
// Before, hold set the key's TTL from the newest holder (its lease + 1 s),
// so the holders of a 1 h lease vanished with the key after a 2 s lease's
// hold and 3 s without another, and the limit admitted past its capacity
// (flake14, miniredis: 2 slots free where Memory said 1).
func TestShorterLeaseKeepsLongerHolders(t *testing.T) {
	ctx := context.Background()
	c := redistest.Shared(t).Client()
	clock := storetest.NewClock(storetest.Start)
	store := newRedis(t, bucket.RedisOptions{Client: c, Now: clock.Now})
	key := fmt.Sprintf("lease-ttl-%d:c", time.Now().UnixNano())
	long, short := bucket.Slots(2, time.Hour), bucket.Slots(2, 2*time.Second)
	for i, l := range []bucket.Limit{long, short} {
		d, err := store.Take(ctx, fmt.Sprintf("%s-r%d", key, i), []bucket.Item{{Key: key, Limit: l, Cost: 1}})
		if err != nil || !d.Allowed {
			t.Fatalf("take %d: %v, allowed %v", i, err, d.Allowed)
		}
	}
	ttl, err := c.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The 1 h holder took its slot at the same (pinned) instant: the key
	// must outlive its lease, less the wall time the two takes took.
	if ttl < time.Hour-time.Minute {
		t.Errorf("the in-flight key's TTL is %v after a 2 s lease's hold, want at least the 1 h holder's lease", ttl)
	}
}
