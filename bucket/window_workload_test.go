package bucket

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// boundaryCounts is what one algorithm admitted on the boundary-burst
// workload (TestBoundaryBurst).
type boundaryCounts struct {
	before, after, steady, worstSpan, worstSecond int
}

// runBoundaryBurst plays the boundary-burst workload on store under l: 150
// requests of one unit 100ms before a window boundary (59.9s), 150 more
// 100ms after it (60.1s), then one request every 200ms until 180s; it
// counts the admissions of each phase and the most admitted in any span of
// one minute.
func runBoundaryBurst(t *testing.T, open func(now func() time.Time) Store, l Limit) boundaryCounts {
	t.Helper()
	ctx := context.Background()
	now := w0
	store := open(func() time.Time { return now })
	var admitted []time.Duration
	take := func(at time.Duration) bool {
		now = w0.Add(at)
		d, err := store.Take(ctx, "", []Item{{Key: "wl:{k}:a", Limit: l, Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted = append(admitted, at)
		}
		return d.Allowed
	}
	var c boundaryCounts
	for range 150 {
		if take(59*time.Second + 900*time.Millisecond) {
			c.before++
		}
	}
	for range 150 {
		if take(60*time.Second + 100*time.Millisecond) {
			c.after++
		}
	}
	for at := 60*time.Second + 300*time.Millisecond; at < 180*time.Second; at += 200 * time.Millisecond {
		if take(at) {
			c.steady++
		}
	}
	for i, end := range admitted {
		n, second := 0, 0
		for _, a := range admitted[:i+1] {
			if a > end-time.Minute {
				n++
			}
			if a > end-time.Second {
				second++
			}
		}
		c.worstSpan = max(c.worstSpan, n)
		c.worstSecond = max(c.worstSecond, second)
	}
	return c
}

// TestBoundaryBurst compares the three algorithms, each 100 requests a
// minute, on one workload: a burst just before a window boundary, another
// just after, then a steady 5 requests a second. The fixed window admits
// both bursts (200 in 200ms); the sliding window and the token bucket admit
// the first only, and then about 100 a minute. In the worst minute all
// three admit about twice the rate (the token bucket's capacity + rate ×
// 60s, the sliding window's bound capacity + prev × e/per): only the fixed
// window packs it into one instant. The counts are exact (a simulated clock), the same
// through the Memory store and the Redis scripts (miniredis); the README's
// table ("Window algorithms") is this test's log:
//
//	go test ./bucket -run TestBoundaryBurst -v
func TestBoundaryBurst(t *testing.T) {
	limits := []Limit{
		{Capacity: 100, Rate: 100, Per: time.Minute},
		Window(SlidingWindow, 100, time.Minute),
		Window(FixedWindow, 100, time.Minute),
	}
	want := map[Algorithm]boundaryCounts{
		TokenBucket:   {before: 100, after: 0, steady: 200, worstSpan: 199, worstSecond: 101},
		SlidingWindow: {before: 100, after: 0, steady: 198, worstSpan: 199, worstSecond: 101},
		FixedWindow:   {before: 100, after: 100, steady: 100, worstSpan: 200, worstSecond: 200},
	}
	memory := func(now func() time.Time) Store { return NewMemory(MemoryOptions{Now: now, SweepEvery: -1}) }
	scripts := func(now func() time.Time) Store {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { c.Close() })
		r, err := NewRedis(RedisOptions{Client: c, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Log("| algorithm | burst at 59.9 s (150) | burst at 60.1 s (150) | steady 60.3–180 s (600) | most in any 60 s | most in any 1 s |")
	t.Log("|---|---|---|---|---|---|")
	for _, l := range limits {
		got := runBoundaryBurst(t, memory, l)
		if viaLua := runBoundaryBurst(t, scripts, l); viaLua != got {
			t.Errorf("%s: Memory admitted %+v, the scripts %+v", l.Algorithm, got, viaLua)
		}
		t.Log(fmt.Sprintf("| %s | %d | %d | %d | %d | %d |", l.Algorithm, got.before, got.after, got.steady, got.worstSpan, got.worstSecond))
		if w, ok := want[l.Algorithm]; ok && got != w {
			t.Errorf("%s admitted %+v, want %+v", l.Algorithm, got, w)
		}
	}
}
