package bucket

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// TestReconcileAggregateStrictest checks that a reconciliation batch, which
// reconcile.lua settles once per bucket (the batch's refunds of it, then its
// charges), leaves each bucket as the strictest order of its requests would
// have: a token bucket's level the least, a quota's used and a window
// counter's count the greatest, over every order of the batch's requests
// applied one by one with the Go arithmetic (apply, applyQuota,
// applyWindow). Levels and counts start near the clamps (a token bucket
// near capacity, a quota and a counter near 0) and are whole numbers, so
// that every order's arithmetic is exact; on miniredis and a real
// redis-server.
func TestReconcileAggregateStrictest(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		testAggregateStrictest(t, c)
	})
	t.Run("redis-server", func(t *testing.T) {
		testAggregateStrictest(t, redistest.Shared(t).Client())
	})
}

func testAggregateStrictest(t *testing.T, c *redis.Client) {
	ctx := context.Background()
	now := t0
	r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tb := Limit{Capacity: 100, Rate: 10, Per: time.Second}
	day := Quota(100, t0.Add(-time.Hour), t0.Add(23*time.Hour))
	win := Window(SlidingWindow, 100, time.Minute)
	keys := []string{"agg:{a}:tb", "agg:{a}:q", "agg:{a}:w"}
	limits := []Limit{tb, day, win}
	_, windowStart, windowEnd := day.window()
	_, per, taken, sliding := win.windowed()
	current := now.UnixMicro() - now.UnixMicro()%per
	rnd := rand.New(rand.NewPCG(14, 5))
	id := 0
	for n := range 300 {
		where := fmt.Sprintf("batch %d", n+1)
		if err := c.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		// The state before: whole numbers near the clamps.
		level := float64(70 + rnd.IntN(31))
		updated := now.UnixMicro() - int64(rnd.IntN(3))*1000000 // refills of 0, 10 or 20 units
		used := float64(rnd.IntN(30))
		prev, cur := float64(rnd.IntN(30)), float64(rnd.IntN(30))
		for k, v := range map[string]string{
			keys[0]: fmt.Sprintf("%d %d", int64(level), updated),
			keys[1]: fmt.Sprintf("q %d %d", int64(used), windowStart),
			keys[2]: fmt.Sprintf("w %d %d %d", int64(prev), int64(cur), current),
		} {
			if err := c.Set(ctx, k, v, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
		}
		batch := make([]Reconciliation, 2+rnd.IntN(4))
		for i := range batch {
			id++
			batch[i].RequestID = "agg-" + strconv.Itoa(id)
			for k, key := range keys {
				if rnd.IntN(4) == 0 {
					continue
				}
				units := int64(rnd.IntN(61) - 30)
				if units == 0 {
					units = 1
				}
				batch[i].Deltas = append(batch[i].Deltas, Delta{Key: key, Limit: limits[k], Units: units})
			}
		}
		for i, err := range r.ReconcileBatch(ctx, batch) {
			if err != nil {
				t.Fatalf("%s: element %d: %v", where, i, err)
			}
		}
		// Every order of the batch's requests, applied one by one.
		capacity, rate, perTB := tb.floats()
		leastLevel, mostUsed, mostCount := 1e18, -1.0, -1.0
		permute(len(batch), func(order []int) {
			l, u := level, updated
			q, w := used, windowStart
			p, cu, st := prev, cur, current
			for _, i := range order {
				for _, d := range batch[i].Deltas {
					switch d.Key {
					case keys[0]:
						l, u = apply(l, u, capacity, rate, perTB, now.UnixMicro(), float64(d.Units))
					case keys[1]:
						q, w, _ = applyQuota(q, w, windowStart, windowEnd, float64(d.Units))
					case keys[2]:
						p, cu, st, _ = applyWindow(p, cu, st, per, now.UnixMicro(), taken, float64(d.Units), sliding)
					}
				}
			}
			leastLevel, mostUsed, mostCount = min(leastLevel, l), max(mostUsed, q), max(mostCount, cu)
		})
		got := func(key string) []float64 {
			v, err := c.Get(ctx, key).Result()
			if err == redis.Nil {
				return nil
			}
			if err != nil {
				t.Fatal(err)
			}
			var out []float64
			for _, f := range strings.Fields(strings.TrimLeft(v, "qw ")) {
				x, err := strconv.ParseFloat(f, 64)
				if err != nil {
					t.Fatalf("%s: %s = %q", where, key, v)
				}
				out = append(out, x)
			}
			return out
		}
		gotLevel := capacity // a deleted bucket is full
		if v := got(keys[0]); v != nil {
			gotLevel = v[0]
		}
		var gotUsed, gotCount float64
		if v := got(keys[1]); v != nil {
			gotUsed = v[0]
		}
		if v := got(keys[2]); v != nil {
			gotCount = v[1]
		}
		if gotLevel != leastLevel {
			t.Errorf("%s: token bucket level %v, the strictest order %v", where, gotLevel, leastLevel)
		}
		if gotUsed != mostUsed {
			t.Errorf("%s: quota used %v, the strictest order %v", where, gotUsed, mostUsed)
		}
		if gotCount != mostCount {
			t.Errorf("%s: window count %v, the strictest order %v", where, gotCount, mostCount)
		}
	}
}

// permute calls f with every order of 0..n-1 (Heap's algorithm).
func permute(n int, f func([]int)) {
	a := make([]int, n)
	for i := range a {
		a[i] = i
	}
	var gen func(k int)
	gen = func(k int) {
		if k <= 1 {
			f(a)
			return
		}
		for i := range k - 1 {
			gen(k - 1)
			if k%2 == 0 {
				a[i], a[k-1] = a[k-1], a[i]
			} else {
				a[0], a[k-1] = a[k-1], a[0]
			}
		}
		gen(k - 1)
	}
	gen(n)
}
