package bucket_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// TestTakeLoneEdgesMatchGeneric: the lone layout (packed costs, packed
// reply, takeLoneRun1..4) gives take.lua's generic body's replies and
// stored values on the numbers loneSteps never reaches: capacities and
// rates up to 2^53, costs of 0, exactly the level, the capacity, one past
// it, past 2^53 (packed as float64, rounded as strtod rounds the text) and
// up to 2^63 - 1, per of 1 µs, takes of 1 to 5 buckets (5: past
// lua.LoneBuckets, the single layout both ways), the clock pinned and
// moving by 0, 1 µs, a long pause and a step back. Seeded, so a failure
// replays.
func TestTakeLoneEdgesMatchGeneric(t *testing.T) {
	caps := []int64{1, 2, 1000, 1<<53 - 1, 1 << 53}
	rates := []int64{1, 3, 1 << 40, 1 << 53}
	pers := []time.Duration{time.Microsecond, time.Second, 7 * time.Second, 24 * time.Hour}
	costOf := func(r *rand.Rand, c int64) int64 {
		switch r.IntN(9) {
		case 0:
			return 0
		case 1:
			return c
		case 2:
			return c + 1
		case 3:
			return 1<<53 + 1 // past 2^53: float64 rounds it to 2^53
		case 4:
			return 1<<63 - 1
		case 5:
			return c / 2
		case 6:
			return 1<<53 - 1
		default:
			return r.Int64N(c) + 1
		}
	}
	start := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	for _, backend := range []string{"miniredis", "redis-server"} {
		t.Run(backend, func(t *testing.T) {
			now := start
			clock := func() time.Time { return now }
			_, c, mr := loneBackend(t, backend, now)
			ctx := context.Background()
			fast := newRedis(t, bucket.RedisOptions{Client: c, Now: clock, TakeBatch: 1})
			generic := newRedis(t, bucket.RedisOptions{Client: c, Now: clock, TakeBatch: 1})
			generic.SendLoneTakesGeneric()
			r := rand.New(rand.NewPCG(20, 7))
			const nKeys = 6
			limits := make([]bucket.Limit, nKeys)
			for k := range limits {
				limits[k] = bucket.Limit{Capacity: caps[r.IntN(len(caps))], Rate: rates[r.IntN(len(rates))], Per: pers[r.IntN(len(pers))]}
			}
			allowed, denied := 0, 0
			for step := range 400 {
				switch r.IntN(6) {
				case 0, 1:
				case 2:
					now = now.Add(time.Microsecond)
				case 3:
					now = now.Add(time.Duration(r.Int64N(int64(time.Hour))))
				case 4:
					now = now.Add(-time.Duration(r.Int64N(int64(time.Second))))
				default:
					now = now.Add(time.Duration(r.Int64N(int64(time.Millisecond))))
				}
				if mr != nil {
					mr.SetTime(now)
				}
				if r.IntN(20) == 0 { // a limit reloaded with other numbers
					k := r.IntN(nKeys)
					limits[k] = bucket.Limit{Capacity: caps[r.IntN(len(caps))], Rate: rates[r.IntN(len(rates))], Per: pers[r.IntN(len(pers))]}
				}
				n := 1 + r.IntN(5)
				var items []bucket.Item
				for _, k := range r.Perm(nKeys)[:n] {
					l := limits[k]
					items = append(items, bucket.Item{Key: fmt.Sprintf("k:{PFX}:edge%d", k), Limit: l, Cost: costOf(r, l.Capacity)})
				}
				id := ""
				if r.IntN(2) == 0 {
					id = fmt.Sprintf("edge-%d", step)
				}
				stepStart := time.Now() // real time, for redis-server's TTLs only
				got := resultOf(fast.Take(ctx, id, named(items, "fast")))
				want := resultOf(generic.Take(ctx, id, named(items, "gen")))
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d (%d buckets %+v): lone layout %+v, generic body %+v", step, n, items, got, want)
				}
				if got.d.Allowed {
					allowed++
				} else if got.err == "" {
					denied++
				}
				for k := range nKeys {
					key := fmt.Sprintf("k:{PFX}:edge%d", k)
					fk, gk := strings.ReplaceAll(key, "PFX", "fast"), strings.ReplaceAll(key, "PFX", "gen")
					fv, _ := c.Get(ctx, fk).Result()
					gv, _ := c.Get(ctx, gk).Result()
					if fv != gv && mr == nil && (fv == "") != (gv == "") {
						// A real redis-server expires keys on its own
						// clock, not the test's: a bucket that refills in a
						// millisecond gets a TTL of one, and the key one
						// layout wrote first can be gone by the time both
						// are read on a loaded machine. Allowed only when
						// the key still there was set to expire no later
						// than the step's real time allows; it is dropped
						// so that both layouts go on from the same state.
						held := fk
						if fv == "" {
							held = gk
						}
						// Gone by now too (PTTL -2: it expired between
						// the GET and this look): both layouts agree again.
						if ttl := c.PTTL(ctx, held).Val(); ttl == -2 || ttl > 0 && ttl <= time.Since(stepStart)+time.Millisecond {
							c.Del(ctx, held)
							continue
						}
					}
					if fv != gv {
						t.Fatalf("step %d: %s: lone layout stored %q, generic body %q", step, key, fv, gv)
					}
				}
			}
			if allowed < 50 || denied < 50 {
				t.Errorf("%d takes allowed, %d denied: the timeline should reach both at least 50 times", allowed, denied)
			}
		})
	}
}
