package bucket_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
	"github.com/llmguard/llmguard/internal/redistest"
)

// The calendar days around storetest.Start (noon, 1 March 2025 UTC).
var (
	qDay1 = time.Date(2025, time.March, 1, 0, 0, 0, 0, time.UTC)
	qDay2 = qDay1.AddDate(0, 0, 1)
	qDay3 = qDay1.AddDate(0, 0, 2)
)

// TestRedisQuotaState checks how take.lua and reconcile.lua store a quota,
// on miniredis with the scripts reading its TIME: one key, "q <used>
// <window start µs>", expiring an hour past the window's end; a later
// window's key keeps its TTL when a lagging caller's take counts in it; a
// quota with nothing used is deleted.
func TestRedisQuotaState(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	mr.SetTime(storetest.Start)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	r := newRedis(t, bucket.RedisOptions{Client: c})
	today, tomorrow := bucket.Quota(10, qDay1, qDay2), bucket.Quota(10, qDay2, qDay3)
	const key = "quota:{t}:q"

	take := func(l bucket.Limit, cost int64) {
		t.Helper()
		if d, err := r.Take(ctx, "", []bucket.Item{{Key: key, Limit: l, Cost: cost}}); err != nil || !d.Allowed {
			t.Fatalf("take %d: %+v, %v", cost, d, err)
		}
	}
	expect := func(step, value string, ttl time.Duration) {
		t.Helper()
		got, err := c.Get(ctx, key).Result()
		if value == "" {
			if err != redis.Nil {
				t.Errorf("%s: key holds %q, want it deleted", step, got)
			}
			return
		}
		if err != nil || got != value {
			t.Errorf("%s: key holds %q (%v), want %q", step, got, err, value)
		}
		if got := mr.TTL(key); got != ttl {
			t.Errorf("%s: TTL %v, want %v", step, got, ttl)
		}
	}

	take(today, 4)
	expect("take 4 at noon", fmt.Sprintf("q 4 %d", qDay1.UnixMicro()), 13*time.Hour)

	mr.SetTime(storetest.Start.Add(12 * time.Hour))
	take(tomorrow, 3)
	expect("day 2 starts", fmt.Sprintf("q 3 %d", qDay2.UnixMicro()), 25*time.Hour)

	mr.FastForward(time.Hour) // the TTL counts down; TIME stays at midnight
	take(today, 2)
	expect("a lagging take keeps day 2's TTL", fmt.Sprintf("q 5 %d", qDay2.UnixMicro()), 24*time.Hour)

	if err := r.Reconcile(ctx, "r1", []bucket.Delta{{Key: key, Limit: tomorrow, Units: -5}}); err != nil {
		t.Fatal(err)
	}
	expect("a refund to nothing used deletes it", "", 0)

	take(tomorrow, 0)
	expect("a cost-zero read writes nothing", "", 0)
}

// TestRedisQuotaTTL checks the expiry on a real redis-server with its own
// clock: an hour past the window's end, as the script's clock sees it.
func TestRedisQuotaTTL(t *testing.T) {
	ctx := context.Background()
	c := redistest.Shared(t).Client()
	r := newRedis(t, bucket.RedisOptions{Client: c})
	now := time.Now()
	l := bucket.Quota(10, now.Add(-time.Minute), now.Add(time.Minute))
	if d, err := r.Take(ctx, "", []bucket.Item{{Key: "qttl:{t}:q", Limit: l, Cost: 1}}); err != nil || !d.Allowed {
		t.Fatalf("take: %+v, %v", d, err)
	}
	got := c.PTTL(ctx, "qttl:{t}:q").Val()
	if least, most := time.Hour+time.Minute-5*time.Second, time.Hour+time.Minute; got < least || got > most {
		t.Errorf("PTTL %v, want in [%v, %v]", got, least, most)
	}
}

// TestMemoryForgetsQuotas checks that the memory store drops a quota with
// nothing used at once, and any other an hour past the end of its window.
func TestMemoryForgetsQuotas(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	m := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	defer m.Close()
	today := bucket.Quota(10, qDay1, qDay2)
	if _, err := m.Take(ctx, "", []bucket.Item{{Key: "a", Limit: today, Cost: 3}, {Key: "b", Limit: today, Cost: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Reconcile(ctx, "", []bucket.Delta{{Key: "b", Limit: today, Units: -3}}); err != nil {
		t.Fatal(err)
	}
	if held, _ := m.Held(); held != 1 {
		t.Fatalf("after a refund of b to nothing used: %d quotas held, want 1", held)
	}
	clock.Set(qDay2.Add(time.Hour - time.Microsecond))
	if n := m.Sweep(); n != 0 {
		t.Fatalf("a sweep within the hour past the window dropped %d", n)
	}
	clock.Set(qDay2.Add(time.Hour))
	if n := m.Sweep(); n != 1 {
		t.Fatalf("a sweep an hour past the window dropped %d, want 1", n)
	}
}

func TestScaleQuota(t *testing.T) {
	l := bucket.Quota(100, qDay1, qDay2)
	if got, want := bucket.ScaleLimit(l, 3), bucket.Quota(33, qDay1, qDay2); got != want {
		t.Errorf("ScaleLimit(%+v, 3) = %+v, want %+v", l, got, want)
	}
	if got, want := bucket.ScaleLimit(bucket.Quota(2, qDay1, qDay2), 4), bucket.Quota(1, qDay1, qDay2); got != want {
		t.Errorf("floor of one unit: %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		name                string
		limit               bucket.Limit
		nodes               int
		maxCost             int64
		burst, rate, factor float64
	}{
		{name: "even split", limit: l, nodes: 4, burst: 1, rate: 1, factor: 2},
		{name: "rounding down", limit: l, nodes: 3, burst: 0.99, rate: 0.99, factor: 1.99},
		{name: "large requests", limit: l, nodes: 4, maxCost: 60, burst: 2.4, rate: 1, factor: 3.4},
		{name: "floor of one unit", limit: bucket.Quota(2, qDay1, qDay2), nodes: 4, burst: 2, rate: 2, factor: 3},
	} {
		o := bucket.OverAdmissionOf(tc.limit, tc.nodes, tc.maxCost)
		if !near(o.Burst, tc.burst) || !near(o.Rate, tc.rate) || !near(o.Factor, tc.factor) {
			t.Errorf("%s: OverAdmissionOf = burst %v rate %v factor %v, want %v %v %v",
				tc.name, o.Burst, o.Rate, o.Factor, tc.burst, tc.rate, tc.factor)
		}
	}
}

// TestFallbackQuota walks one node's share of a daily quota: a quarter of
// it per window, a denial waits for the window's end, a request above the
// share passes only with nothing used and leaves the share overused, and
// the next window starts afresh.
func TestFallbackQuota(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	f := bucket.NewFallback(bucket.FallbackOptions{Nodes: 4, Memory: bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1}})
	defer f.Close()
	today, tomorrow := bucket.Quota(100, qDay1, qDay2), bucket.Quota(100, qDay2, qDay3) // a node: 25 a day

	steps := []struct {
		name       string
		at         time.Duration
		limit      bucket.Limit
		cost       int64
		allowed    bool
		tooLarge   bool
		status     bucket.Status
		retryAfter time.Duration
	}{
		{name: "the node's share", at: 0, limit: today, cost: 25, allowed: true, status: bucket.Status{Remaining: 0, Reset: 12 * time.Hour}},
		{name: "used up until the window ends", at: time.Hour, limit: today, cost: 1,
			status: bucket.Status{Remaining: 0, Reset: 11 * time.Hour}, retryAfter: 11 * time.Hour},
		{name: "above the limit", at: time.Hour, limit: today, cost: 101, tooLarge: true, status: bucket.Status{Remaining: 0, Reset: 11 * time.Hour}},
		{name: "above the share, share used: waits", at: time.Hour, limit: today, cost: 60,
			status: bucket.Status{Remaining: 0, Reset: 11 * time.Hour}, retryAfter: 11 * time.Hour},
		{name: "next window, above the share: overuse", at: 12 * time.Hour, limit: tomorrow, cost: 60, allowed: true,
			status: bucket.Status{Remaining: -35, Reset: 24 * time.Hour}},
		{name: "overuse holds to the window's end", at: 13 * time.Hour, limit: tomorrow, cost: 1,
			status: bucket.Status{Remaining: -35, Reset: 23 * time.Hour}, retryAfter: 23 * time.Hour},
	}
	for i, s := range steps {
		clock.Set(storetest.Start.Add(s.at))
		d, err := f.Take(ctx, "", []bucket.Item{{Key: "k", Limit: s.limit, Cost: s.cost}})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != s.allowed || d.TooLarge != s.tooLarge || d.Buckets[0] != s.status || d.RetryAfter != s.retryAfter {
			t.Fatalf("step %d (%s): %+v; want allowed %v, too large %v, status %+v, retry after %v",
				i+1, s.name, d, s.allowed, s.tooLarge, s.status, s.retryAfter)
		}
	}
	if err := f.Reconcile(ctx, "r1", []bucket.Delta{{Key: "k", Limit: tomorrow, Units: -50}}); err != nil {
		t.Fatal(err)
	}
	if d, _ := f.Take(ctx, "", []bucket.Item{{Key: "k", Limit: tomorrow, Cost: 15}}); !d.Allowed || d.Buckets[0].Remaining != 0 {
		t.Fatalf("after a refund of 50: %+v, want 15 allowed and the share used up", d)
	}
}
