package bucket_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// groupDenialCase is one request over two slot groups, "{a…}" (the items
// under test, which can pay) and "{b…}" (a token bucket that cannot): a
// denial by the second group whose first group took and is refunded.
type groupDenialCase struct {
	name  string
	a     []bucket.Item // the first group's items; Cost is the request's
	spent []int64       // taken from each of a before the request
	// spentAgo is how long before the request spent is taken (0: at its
	// instant): a sliding window's previous window.
	spentAgo time.Duration
	// reread: the first group's statuses are read again after the refund
	// (a token bucket's wait past the scripts' cap), not taken from its
	// take's reply: one script call more.
	reread bool
	// slack is how much later than Memory's a reported Reset may be (a
	// refill of the cost that is not a whole number of µs).
	slack time.Duration
}

func groupDenialCases(now time.Time) []groupDenialCase {
	day := bucket.Quota(100, now.Add(-time.Hour), now.Add(23*time.Hour))
	tb := bucket.Limit{Capacity: 100, Rate: 1, Per: time.Second}
	thirds := bucket.Limit{Capacity: 10, Rate: 3, Per: time.Second}              // a unit refills in 333,333.3 µs
	slow := bucket.Limit{Capacity: 100, Rate: 1, Per: 10 * 365 * 24 * time.Hour} // 40 units' refill: past 2^53 µs
	sliding := bucket.Window(bucket.SlidingWindow, 100, time.Minute)
	return []groupDenialCase{
		{name: "token bucket", a: []bucket.Item{{Limit: tb, Cost: 10}}, spent: []int64{30}},
		{name: "token bucket full before the take", a: []bucket.Item{{Limit: tb, Cost: 10}}, spent: []int64{0}},
		{name: "token bucket, a cost's refill not whole µs", a: []bucket.Item{{Limit: thirds, Cost: 1}, {Limit: thirds, Cost: 2}}, spent: []int64{4, 3}, slack: time.Microsecond},
		{name: "quota", a: []bucket.Item{{Limit: day, Cost: 10}}, spent: []int64{30}},
		{name: "token bucket and quota", a: []bucket.Item{{Limit: tb, Cost: 10}, {Limit: day, Cost: 25}}, spent: []int64{30, 40}},
		{name: "token bucket waiting past the cap", a: []bucket.Item{{Limit: slow, Cost: 10}}, spent: []int64{30}, reread: true},
		// now is 20 s into its minute (1,700,000,000 s is 28,333,333 minutes and 20 s).
		{name: "sliding window", a: []bucket.Item{{Limit: sliding, Cost: 10}}, spent: []int64{30}},
		{name: "sliding window, its current window empty before the take", a: []bucket.Item{{Limit: sliding, Cost: 10}}, spent: []int64{30}, spentAgo: 30 * time.Second},
		{name: "sliding window, a weight not whole", a: []bucket.Item{{Limit: sliding, Cost: 10}}, spent: []int64{7}, spentAgo: 30 * time.Second},
		{name: "sliding window, empty before the take", a: []bucket.Item{{Limit: sliding, Cost: 10}}, spent: []int64{0}},
		{name: "sliding window with a token bucket, a cost's refill not whole µs", a: []bucket.Item{{Limit: sliding, Cost: 10}, {Limit: thirds, Cost: 1}}, spent: []int64{30, 4}},
		{name: "fixed window", a: []bucket.Item{{Limit: bucket.Window(bucket.FixedWindow, 100, time.Minute), Cost: 10}}, spent: []int64{30}},
		{name: "fixed window and quota", a: []bucket.Item{{Limit: bucket.Window(bucket.FixedWindow, 100, time.Minute), Cost: 10}, {Limit: day, Cost: 25}}, spent: []int64{30, 40}},
		{name: "in-flight", a: []bucket.Item{{Limit: bucket.Slots(5, 10*time.Second), Cost: 1}}, spent: []int64{0}},
		{name: "in-flight, its last slot", a: []bucket.Item{{Limit: bucket.Slots(5, 10*time.Second), Cost: 1}}, spent: []int64{4}},
		{name: "in-flight, holding none", a: []bucket.Item{{Limit: bucket.Slots(5, 10*time.Second), Cost: 0}}, spent: []int64{5}},
		{name: "token bucket and in-flight", a: []bucket.Item{{Limit: tb, Cost: 10}, {Limit: bucket.Slots(5, 10*time.Second), Cost: 1}}, spent: []int64{30, 0}},
	}
}

// TestGroupDenialStatusesFromTheTake checks that a request denied by one
// slot group reports the statuses of another group that took (and was
// refunded) as one take over all items does (Memory, the same clock),
// and that it spends one script call for that group's statuses only when
// its reply cannot tell them (window counters, in-flight limits): a token
// bucket's and a quota's come from the take's own reply. On miniredis
// (replies of integers) and on a Redis Cluster (a lone take of token
// buckets replies its levels).
func TestGroupDenialStatusesFromTheTake(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { rc.Close() })
		testGroupDenialStatuses(t, rc, func(now func() time.Time) *bucket.Redis {
			return newRedis(t, bucket.RedisOptions{Client: rc, Cluster: true, Now: now})
		})
	})
	t.Run("cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a Redis Cluster")
		}
		cc := redistest.SharedCluster(t, 3).Client()
		testGroupDenialStatuses(t, cc, func(now func() time.Time) *bucket.Redis {
			return newRedis(t, bucket.RedisOptions{Client: cc, Now: now})
		})
	})
}

func testGroupDenialStatuses(t *testing.T, client redis.UniversalClient, store func(now func() time.Time) *bucket.Redis) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	at := now // the stores' clock
	clock := func() time.Time { return at }
	counter := &tripCounter{commands: map[string]int{}}
	client.AddHook(counter)
	short := bucket.Limit{Capacity: 10, Rate: 1, Per: time.Second}
	for n, c := range groupDenialCases(now) {
		t.Run(c.name, func(t *testing.T) {
			// Fresh keys each run: the shared cluster outlives the test.
			tag := fmt.Sprintf("%d-%d", n, time.Now().UnixNano())
			items := make([]bucket.Item, 0, len(c.a)+1)
			for j, it := range c.a {
				it.Key = fmt.Sprintf("llmguard:{a%s}:%d", tag, j)
				items = append(items, it)
			}
			items = append(items, bucket.Item{Key: fmt.Sprintf("llmguard:{b%s}:y", tag), Limit: short, Cost: 8})
			r, mem := store(clock), bucket.NewMemory(bucket.MemoryOptions{Now: clock, SweepEvery: -1})
			var got, want bucket.Decision
			for _, s := range []bucket.Store{r, mem} {
				at = now.Add(-c.spentAgo)
				for j, spent := range c.spent {
					pre := []bucket.Item{{Key: items[j].Key, Limit: items[j].Limit, Cost: spent}}
					takes, id := 1, ""
					if items[j].Limit.Concurrent { // a slot a holder
						takes, pre[0].Cost = int(spent), 1
					}
					for range takes {
						if items[j].Limit.Concurrent {
							id = bucket.NewRequestID(at)
						}
						if d, err := s.Take(ctx, id, pre); spent > 0 && (err != nil || !d.Allowed) {
							t.Fatalf("%T: spending %d of item %d first: %+v, %v", s, spent, j, d, err)
						}
					}
				}
				at = now
				b := []bucket.Item{{Key: items[len(c.a)].Key, Limit: short, Cost: 7}}
				if d, err := s.Take(ctx, "", b); err != nil || !d.Allowed {
					t.Fatalf("%T: spending 7 of {b}: %+v, %v", s, d, err)
				}
				counter.take()
				d, err := s.Take(ctx, bucket.NewRequestID(now), items)
				if err != nil {
					t.Fatalf("%T: %v", s, err)
				}
				if s == bucket.Store(mem) {
					want = d
					continue
				}
				got = d
				_, cmds := counter.take()
				calls := cmds["fcall"] + cmds["evalsha"] + cmds["eval"]
				wantCalls := 3 // the two groups' takes, the first's refund
				if c.reread {
					wantCalls++
				}
				if calls != wantCalls {
					t.Errorf("%d script calls (%v), want %d", calls, cmds, wantCalls)
				}
			}
			compareGroupDenial(t, got, want, c.slack)
		})
	}
}

// compareGroupDenial reports where got, the Redis store's Decision,
// differs from want, Memory's: exactly, but that a Reset may be up to
// slack later.
func compareGroupDenial(t *testing.T, got, want bucket.Decision, slack time.Duration) {
	t.Helper()
	if got.Allowed || got.Allowed != want.Allowed || got.DeniedBy != want.DeniedBy || got.TooLarge != want.TooLarge || got.RetryAfter != want.RetryAfter {
		t.Errorf("decided %+v, want %+v", got, want)
		return
	}
	for i, w := range want.Buckets {
		g := got.Buckets[i]
		if g.Remaining != w.Remaining || g.Reset < w.Reset || g.Reset > w.Reset+slack {
			t.Errorf("item %d: %+v, want %+v (Reset up to %v later)", i, g, w, slack)
		}
	}
}
