package bucket_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
	"github.com/llmguard/llmguard/internal/redistest"
)

// The property of sharded limits, on every store: over random sequences of
// requests of random costs (some above a shard's capacity, some above the
// whole limit's) and refunds of earlier ones, on a clock the test moves,
//
//   - the units admitted, less the units refunded, never exceed
//     capacity + rate × elapsed (a daily quota: its capacity in each day):
//     no over-admission;
//   - a denied request spends nothing: every shard holds after it what it
//     held before (read at the same instant);
//   - a request is denied (not too large) only when the shards held, in
//     whole units, less than its cost: the under-admission bound of
//     README "Sharded limits";
//   - an admitted request took exactly its cost, from shards of its limit.
func TestShardedPropertyMemory(t *testing.T) {
	shardProperty(t, func(t *testing.T, clock *storetest.Clock) bucket.Store {
		m := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
		t.Cleanup(func() { m.Close() })
		return m
	})
}

func TestShardedPropertyRedis(t *testing.T) {
	c := redistest.Shared(t).Client()
	shardProperty(t, func(t *testing.T, clock *storetest.Clock) bucket.Store {
		return newRedis(t, bucket.RedisOptions{Client: c, Now: clock.Now})
	})
}

// In a cluster every shard lies in a slot of its own, so each try runs one
// script per slot group, all at once, refunding the groups that took on a denial.
func TestShardedPropertyCluster(t *testing.T) {
	c := redistest.SharedCluster(t, 3).Client()
	shardProperty(t, func(t *testing.T, clock *storetest.Clock) bucket.Store {
		return newRedis(t, bucket.RedisOptions{Client: c, Now: clock.Now})
	})
}

func shardProperty(t *testing.T, newStore storetest.NewStore) {
	for _, tc := range []struct {
		name   string
		limit  bucket.Limit
		shards int
	}{
		{"40 per second in 4", bucket.Limit{Capacity: 40, Rate: 8, Per: time.Second}, 4},
		{"1000 per second in 7", bucket.Limit{Capacity: 1000, Rate: 301, Per: time.Second}, 7},
		{"daily quota of 500 in 3", bucket.Quota(500, storetest.Start, storetest.Start.Add(time.Hour)), 3}, // the day of each step
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := storetest.NewClock(storetest.Start)
			s := newStore(t, clock)
			prefix := fmt.Sprintf("prop%d:%s", time.Now().UnixNano(), strings.ReplaceAll(tc.name, " ", "-"))
			runShardProperty(t, s, clock, prefix, tc.limit, tc.shards)
		})
	}
}

func runShardProperty(t *testing.T, s bucket.Store, clock *storetest.Clock, prefix string, whole bucket.Limit, k int) {
	ctx := context.Background()
	quota := whole.IsQuota()
	at := func(now time.Time) bucket.Limit { // a quota's limit in the day of now
		if !quota {
			return whole
		}
		day := now.Truncate(24 * time.Hour)
		return bucket.Quota(whole.Capacity, day, day.Add(24*time.Hour))
	}
	r := rand.New(rand.NewPCG(11, uint64(whole.Capacity)))
	keys := bucket.ShardKeys{Prefix: prefix + ":{g:", Suffix: "}:l"}
	// An unsharded bucket that never binds, in a slot of its own, so that
	// every try is a take of two buckets (several slot groups in a cluster).
	user := bucket.Item{Key: prefix + ":{u}:user", Limit: bucket.Limit{Capacity: 1 << 40, Rate: 1 << 40, Per: time.Second}}
	l := at(storetest.Start)
	smallest := bucket.ShardLimit(l, k, k-1).Capacity
	var (
		now      = storetest.Start
		net      int64 // admitted, less refunded (a quota: in the current window)
		admitted int
		denied   int
		multi    int // admitted from several shards
		taken    [][]bucket.Item
		gap      = time.Second / 10
	)
	if quota {
		gap = 40 * time.Minute // about 18 requests a day
	}
	pace := storetest.NewPacer(now)
	for i := range 800 {
		now = pace.Step(now.Add(time.Duration(r.Int64N(int64(gap))) / time.Microsecond * time.Microsecond))
		clock.Set(now)
		if next := at(now); !next.WindowStart.Equal(l.WindowStart) {
			net, taken = 0, nil // a new day: the refunds of the last one apply to nothing
		}
		l = at(now)
		if i%5 == 4 && len(taken) > 0 { // a request used less than it reserved
			j := r.IntN(len(taken))
			var paid int64
			for _, it := range taken[j] {
				paid += it.Cost
			}
			refund := r.Int64N(paid + 1)
			deltas := bucket.SplitDelta(nil, taken[j], -refund)
			if err := s.Reconcile(ctx, fmt.Sprint(prefix, "-rc-", i), deltas); err != nil {
				t.Fatal(err)
			}
			for _, d := range deltas {
				if !strings.HasPrefix(d.Key, keys.Prefix) {
					t.Fatalf("step %d: refund to %q, not a shard", i, d.Key)
				}
			}
			net -= refund
			taken = append(taken[:j], taken[j+1:]...)
			continue
		}
		var cost int64
		switch n := r.IntN(20); {
		case n == 0:
			cost = l.Capacity + 1 + r.Int64N(l.Capacity) // too large
		case n < 4:
			cost = smallest + 1 + r.Int64N(l.Capacity-smallest) // several shards
		default:
			cost = r.Int64N(smallest + 1)
		}
		before := levels(t, s, keys, l, k)
		user.Cost = cost
		d, err := bucket.TakeSharded(ctx, s, fmt.Sprint(prefix, "-", i), []bucket.ShardedItem{
			{Item: user},
			{Item: bucket.Item{Key: prefix + ":{g}:l", Limit: l, Cost: cost}, Shards: k, Keys: keys},
		}, func(n int) int { return r.IntN(n) })
		if err != nil {
			t.Fatalf("step %d cost %d: %v", i, cost, err)
		}
		if !d.Allowed {
			denied++
			if after := levels(t, s, keys, l, k); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("step %d: a denial of %d spent: shards %v, then %v", i, cost, before, after)
			}
			switch {
			case d.TooLarge != (cost > l.Capacity):
				t.Fatalf("step %d: cost %d of capacity %d: too large %v", i, cost, l.Capacity, d.TooLarge)
			case d.DeniedBy != 1:
				t.Fatalf("step %d: denied by %d, want the sharded limit", i, d.DeniedBy)
			case d.TooLarge:
			case held(before) >= cost:
				t.Fatalf("step %d: cost %d denied after %d tries though the shards held %v", i, cost, d.Tries, before)
			}
			continue
		}
		var paid int64
		for _, it := range d.Taken[1] {
			if !strings.HasPrefix(it.Key, keys.Prefix) || it.Cost > it.Limit.Capacity {
				t.Fatalf("step %d: took %+v", i, it)
			}
			paid += it.Cost
		}
		if paid != cost || len(d.Taken[0]) != 1 || d.Taken[0][0].Key != user.Key {
			t.Fatalf("step %d: cost %d, took %+v", i, cost, d.Taken)
		}
		if len(d.Taken[1]) > 1 {
			multi++
		}
		admitted++
		net += cost
		taken = append(taken, d.Taken[1])
		bound := l.Capacity
		if !quota {
			bound += int64(now.Sub(storetest.Start)/time.Microsecond) * l.Rate / int64(l.Per/time.Microsecond)
		}
		if net > bound {
			t.Fatalf("step %d at +%v: %d units admitted net, over the bound %d", i, now.Sub(storetest.Start), net, bound)
		}
	}
	t.Logf("%d admitted (%d from several shards), %d denied", admitted, multi, denied)
	if admitted < 100 || denied < 50 || multi < 10 {
		t.Fatalf("%d admitted (%d from several shards), %d denied: the run does not exercise the limit", admitted, multi, denied)
	}
}

// held is what shards of these levels can pay in all: their positive
// Remaining.
func held(levels []int64) (n int64) {
	for _, x := range levels {
		n += max(x, 0)
	}
	return n
}
