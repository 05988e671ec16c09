package bucket_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
)

// The shards of a limit add up to it exactly: capacities and rates, for
// every shard count, never more (over-admission) and never less.
func TestShardLimitAddsUp(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		k := 2 + r.IntN(bucket.MaxShards-1)
		l := bucket.Limit{Capacity: int64(k) + r.Int64N(1e9), Rate: int64(k) + r.Int64N(1e6), Per: time.Second}
		var capacity, rate int64
		for i := range k {
			s := bucket.ShardLimit(l, k, i)
			if err := s.Validate(); err != nil {
				t.Fatalf("%+v shard %d of %d: %v", l, i, k, err)
			}
			if s.Capacity < l.Capacity/int64(k) || s.Capacity > l.Capacity/int64(k)+1 || s.Per != l.Per {
				t.Fatalf("%+v shard %d of %d: %+v is not a fair share", l, i, k, s)
			}
			capacity += s.Capacity
			rate += s.Rate
		}
		if capacity != l.Capacity || rate != l.Rate {
			t.Fatalf("%+v in %d shards: capacities add up to %d, rates to %d", l, k, capacity, rate)
		}
	}
	q := bucket.Quota(10, storetest.Start, storetest.Start.Add(time.Hour))
	if s := bucket.ShardLimit(q, 3, 0); s.Capacity != 4 || !s.WindowEnd.Equal(q.WindowEnd) || s.Rate != 0 {
		t.Fatalf("quota shard 0 of 3: %+v, want capacity 4 in the same window", s)
	}
	if s := bucket.ShardLimit(q, 1, 0); s != q {
		t.Fatalf("one shard: %+v, want the limit itself", s)
	}
}

// shardedMemory is a memory store on a clock that moves only when told.
func shardedMemory(t *testing.T) (*bucket.Memory, *storetest.Clock) {
	clock := storetest.NewClock(storetest.Start)
	m := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	t.Cleanup(func() { m.Close() })
	return m, clock
}

var fourShards = bucket.ShardKeys{Prefix: "t:{g:", Suffix: "}:l"}

// sharded is a ShardedItem of limit l in 4 shards of fourShards, cost cost.
func sharded(l bucket.Limit, cost int64) bucket.ShardedItem {
	return bucket.ShardedItem{Item: bucket.Item{Key: "t:{g}:l", Limit: l, Cost: cost}, Shards: 4, Keys: fourShards}
}

// levels reads the Remaining of every shard of keys (k of them) under l
// with one cost-0 take, which changes nothing.
func levels(t *testing.T, s bucket.Store, keys bucket.ShardKeys, l bucket.Limit, k int) []int64 {
	t.Helper()
	items := make([]bucket.Item, k)
	for i := range k {
		items[i] = bucket.Item{Key: keys.Key(i), Limit: bucket.ShardLimit(l, k, i)}
	}
	d, err := s.Take(context.Background(), "", items)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, k)
	for i, b := range d.Buckets {
		out[i] = b.Remaining
	}
	return out
}

func sum(xs []int64) (n int64) {
	for _, x := range xs {
		n += x
	}
	return n
}

// A request takes from the shard picked for it, moves to the next shards
// when that one is short, and is denied only once every shard was tried;
// a denial spends nothing.
func TestTakeShardedTriesEveryShard(t *testing.T) {
	ctx := context.Background()
	m, _ := shardedMemory(t)
	l := bucket.Limit{Capacity: 40, Rate: 4, Per: time.Hour} // 10 per shard; the clock never moves
	pick := func(int) int { return 2 }
	for n := range 4 {
		d, err := bucket.TakeSharded(ctx, m, fmt.Sprint("r", n), []bucket.ShardedItem{sharded(l, 10)}, pick)
		if err != nil {
			t.Fatal(err)
		}
		// Shard 2 first, then 3, 0, 1: request n is admitted on its try n+1.
		want := (2 + n) % 4
		if !d.Allowed || d.Tries != n+1 || len(d.Taken[0]) != 1 || d.Taken[0][0].Key != fourShards.Key(want) || d.Taken[0][0].Cost != 10 {
			t.Fatalf("request %d: %+v, want admitted by shard %d on try %d", n, d, want, n+1)
		}
		// The estimate scales what the shards tried held to all four: the
		// empty shards tried before count (request 1 saw 0 and 10: 20, less
		// its 10).
		if r, want := d.Buckets[0].Remaining, []int64{30, 10, 3, 0}[n]; r != want {
			t.Fatalf("request %d: whole limit remaining %d, want %d", n, r, want)
		}
	}
	before := levels(t, m, fourShards, l, 4)
	d, err := bucket.TakeSharded(ctx, m, "r4", []bucket.ShardedItem{sharded(l, 1)}, pick)
	if err != nil {
		t.Fatal(err)
	}
	// Four tries of one shard each; no gather (nothing held).
	if d.Allowed || d.TooLarge || d.DeniedBy != 0 || d.Tries != 4 || d.Taken != nil {
		t.Fatalf("empty shards: %+v, want denied by item 0 after 4 tries", d)
	}
	// Each shard refills 1 unit per hour: the first to hold 1 does in 1h.
	if d.RetryAfter != time.Hour || d.Buckets[0].Remaining != 0 {
		t.Fatalf("denial: retry %v remaining %d, want 1h and 0", d.RetryAfter, d.Buckets[0].Remaining)
	}
	if after := levels(t, m, fourShards, l, 4); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a denial spent: shards %v, then %v", before, after)
	}
}

// A request that costs more than a shard holds is taken from several
// shards at once, all or nothing; one above the whole limit is too large;
// and when no window of shards can pay but together they hold the cost, one
// last try takes it from each by what it holds.
func TestTakeShardedAcrossShards(t *testing.T) {
	ctx := context.Background()
	m, _ := shardedMemory(t)
	l := bucket.Limit{Capacity: 42, Rate: 42, Per: time.Hour} // shards of 11, 11, 10, 10
	pick := func(int) int { return 3 }

	d, err := bucket.TakeSharded(ctx, m, "big", []bucket.ShardedItem{sharded(l, 25)}, pick)
	if err != nil {
		t.Fatal(err)
	}
	// ⌈25/10⌉ = 3 shards from shard 3: 3, 0, 1 pay 8, 9, 8 (the larger
	// shards 0 and 1 first for the remainder).
	if !d.Allowed || d.Tries != 1 || len(d.Taken[0]) != 3 {
		t.Fatalf("cost 25: %+v, want admitted from 3 shards at once", d)
	}
	paid := map[string]int64{}
	for _, it := range d.Taken[0] {
		paid[it.Key] = it.Cost
	}
	if paid[fourShards.Key(3)] != 8 || paid[fourShards.Key(0)] != 9 || paid[fourShards.Key(1)] != 8 {
		t.Fatalf("cost 25 split %v, want shard 3: 8, 0: 9, 1: 8", paid)
	}
	if got := levels(t, m, fourShards, l, 4); fmt.Sprint(got) != "[2 3 10 2]" {
		t.Fatalf("shards after the take: %v, want [2 3 10 2]", got)
	}

	d, err = bucket.TakeSharded(ctx, m, "huge", []bucket.ShardedItem{sharded(l, 43)}, pick)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || !d.TooLarge || d.Tries != 1 || d.RetryAfter != 0 {
		t.Fatalf("cost 43 of 42: %+v, want too large at once", d)
	}

	// 12 units: two shards of 6 each from shard 3 on ([3 0] then [1 2]):
	// no window holds 6 + 6; together the shards hold 2+3+10+2 = 17, so
	// the last try takes 10 + 2 from the fullest.
	d, err = bucket.TakeSharded(ctx, m, "gather", []bucket.ShardedItem{sharded(l, 12)}, pick)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed || d.Tries != 3 || len(d.Taken[0]) != 2 {
		t.Fatalf("cost 12 over shards [2 3 10 2]: %+v, want admitted by the third try from 2 shards", d)
	}
	if got := levels(t, m, fourShards, l, 4); sum(got) != 5 || got[2] != 0 {
		t.Fatalf("shards after gathering 12: %v, want 5 left and shard 2 empty", got)
	}

	// 6 units: the shards hold 5 in all, so it is denied after the windows
	// (no gather: not enough), spending nothing.
	before := levels(t, m, fourShards, l, 4)
	d, err = bucket.TakeSharded(ctx, m, "short", []bucket.ShardedItem{sharded(l, 6)}, pick)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.TooLarge || d.Tries != 4 || d.Buckets[0].Remaining != 5 {
		t.Fatalf("cost 6 over 5 units: %+v, want denied after 4 tries, 5 remaining", d)
	}
	if after := levels(t, m, fourShards, l, 4); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a denial spent: shards %v, then %v", before, after)
	}
}

// A denial by an unsharded bucket ends the take at once: other shards
// cannot help it.
func TestTakeShardedStopsAtAnUnshardedDenial(t *testing.T) {
	ctx := context.Background()
	m, _ := shardedMemory(t)
	user := bucket.Item{Key: "t:{acme}:u:alice", Limit: bucket.Limit{Capacity: 5, Rate: 5, Per: time.Hour}, Cost: 5}
	items := []bucket.ShardedItem{{Item: user}, sharded(bucket.Limit{Capacity: 40, Rate: 40, Per: time.Hour}, 5)}
	pick := func(int) int { return 1 }
	if d, err := bucket.TakeSharded(ctx, m, "a", items, pick); err != nil || !d.Allowed {
		t.Fatalf("first: %+v %v", d, err)
	}
	d, err := bucket.TakeSharded(ctx, m, "b", items, pick)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.DeniedBy != 0 || d.Tries != 1 {
		t.Fatalf("user bucket empty: %+v, want denied by item 0 on the first try", d)
	}
	if d.Buckets[1].Remaining != 20 {
		t.Fatalf("the global limit's estimate %d, want 20 (its one shard seen holds 5 of 10)", d.Buckets[1].Remaining)
	}
}

// When an unsharded bucket waits longer than a sharded item's shard, the
// take names the unsharded one with its own wait, on the first try (the
// store names the longest wait): other shards cannot shorten it. Before,
// the sharded item, short first, was tried on every shard and named with
// the other's wait.
func TestTakeShardedNamesTheLongestWait(t *testing.T) {
	ctx := context.Background()
	m, _ := shardedMemory(t)
	l := bucket.Limit{Capacity: 40, Rate: 4, Per: time.Hour} // 10 a shard, each refilled 1 an hour
	day := bucket.Item{Key: "t:{acme}:u:alice", Limit: bucket.Limit{Capacity: 1, Rate: 1, Per: 24 * time.Hour}, Cost: 1}
	drain := []bucket.Item{day}
	for i := range 4 {
		drain = append(drain, bucket.Item{Key: fourShards.Key(i), Limit: bucket.ShardLimit(l, 4, i), Cost: 10})
	}
	if d, err := m.Take(ctx, "", drain); err != nil || !d.Allowed {
		t.Fatalf("drain: %+v %v", d, err)
	}
	items := []bucket.ShardedItem{sharded(l, 1), {Item: day}}
	d, err := bucket.TakeSharded(ctx, m, "r", items, func(int) int { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.TooLarge || d.DeniedBy != 1 || d.RetryAfter != 24*time.Hour || d.Tries != 1 {
		t.Fatalf("%+v, want denied by item 1 with its 24h on the first try", d)
	}
}

// Invalid shard counts and limits too small for their shards are refused
// as invalid, before any store call.
func TestTakeShardedInvalid(t *testing.T) {
	m, _ := shardedMemory(t)
	for _, it := range []bucket.ShardedItem{
		{Item: bucket.Item{Key: "k", Limit: bucket.Limit{Capacity: 10, Rate: 10, Per: time.Second}}, Shards: bucket.MaxShards + 1, Keys: fourShards},
		{Item: bucket.Item{Key: "k", Limit: bucket.Limit{Capacity: 3, Rate: 10, Per: time.Second}}, Shards: 4, Keys: fourShards},
		{Item: bucket.Item{Key: "k", Limit: bucket.Limit{Capacity: 10, Rate: 3, Per: time.Second}}, Shards: 4, Keys: fourShards},
		{Item: bucket.Item{Key: "k", Limit: bucket.Limit{Capacity: 10, Rate: 10, Per: time.Second}, Cost: -1}, Shards: 4, Keys: fourShards},
	} {
		if _, err := bucket.TakeSharded(context.Background(), m, "", []bucket.ShardedItem{it}, nil); !errors.Is(err, bucket.ErrInvalid) {
			t.Errorf("%+v: err %v, want ErrInvalid", it, err)
		}
	}
}

// Reconciliation goes to the shards taken from, in proportion to what each
// paid; a refund never returns to a shard more than it paid.
func TestSplitDelta(t *testing.T) {
	l := bucket.Limit{Capacity: 10, Rate: 1, Per: time.Second}
	taken := []bucket.Item{{Key: "a", Limit: l, Cost: 9}, {Key: "b", Limit: l, Cost: 8}, {Key: "c", Limit: l, Cost: 8}}
	for _, tc := range []struct {
		units int64
		want  string
	}{
		{-25, "a:-9 b:-8 c:-8"},
		{-1, "a:-1"},
		{-10, "a:-4 b:-3 c:-3"},
		{5, "a:2 b:2 c:1"},
		{0, ""},
	} {
		got := ""
		var total int64
		for _, d := range bucket.SplitDelta(nil, taken, tc.units) {
			got += fmt.Sprintf(" %s:%d", d.Key, d.Units)
			total += d.Units
		}
		if len(got) > 0 {
			got = got[1:]
		}
		if got != tc.want || total != tc.units {
			t.Errorf("split %d: %q (sum %d), want %q", tc.units, got, total, tc.want)
		}
	}
	one := bucket.SplitDelta(nil, taken[:1], -3)
	if len(one) != 1 || one[0].Units != -3 || one[0].Key != "a" {
		t.Errorf("one bucket: %+v", one)
	}
	// Proportions hold at the largest units, without overflow.
	big := []bucket.Item{{Key: "a", Limit: l, Cost: 1 << 52}, {Key: "b", Limit: l, Cost: 1 << 52}}
	if d := bucket.SplitDelta(nil, big, -(1 << 53)); len(d) != 2 || d[0].Units != -(1<<52) || d[1].Units != -(1<<52) {
		t.Errorf("huge refund split %+v", d)
	}
}

// TestTakeShardedHugeCost: a cost near MaxInt64 (reachable: an image
// request of 10^15 images is capped there) is refused as too large, never
// taken from no shard at all.
func TestTakeShardedHugeCost(t *testing.T) {
	for _, cost := range []int64{math.MaxInt64, math.MaxInt64 - 100, math.MaxInt64 / 2, 1001} {
		m := bucket.NewMemory(bucket.MemoryOptions{})
		it := sharded(bucket.Limit{Capacity: 1000, Rate: 10, Per: time.Second}, cost)
		d, err := bucket.TakeSharded(context.Background(), m, "r", []bucket.ShardedItem{it}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed || !d.TooLarge {
			t.Errorf("cost %d: allowed %v, too large %v (taken %v); want refused as too large", cost, d.Allowed, d.TooLarge, d.Taken)
		}
		m.Close()
	}
}

// Over a DenyCache, a sharded request whose tries are answered from memory
// is one cached denial for OnCached (llmguard_denials_cached_total, read
// against the 429s), not one per shard tried; and a request admitted by a
// later shard after a cached try is none.
func TestTakeShardedCountsOneCachedDenialPerRequest(t *testing.T) {
	ctx := context.Background()
	c, _, _, _, hits := denyCached(t, time.Second)
	l := bucket.Limit{Capacity: 8, Rate: 4, Per: time.Hour} // 2 per shard; the clock never moves
	take := func(step string, id string, cost int64, start int) bucket.ShardedDecision {
		t.Helper()
		d, err := bucket.TakeSharded(ctx, c, id, []bucket.ShardedItem{sharded(l, cost)}, func(int) int { return start })
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return d
	}
	steps := []struct {
		name          string
		cost          int64
		start         int
		allowed       bool
		tries, cached int // cached: OnCached calls so far
	}{
		{name: "drain shard 0", cost: 2, start: 0, allowed: true, tries: 1},
		{name: "shard 0 denies (the store), shard 1 admits", cost: 1, start: 0, allowed: true, tries: 2},
		{name: "shard 0 denies from memory, shard 1 admits: no cached denial", cost: 1, start: 0, allowed: true, tries: 2},
		{name: "drain shards 2 and 3", cost: 4, start: 2, allowed: true, tries: 1},
		{name: "every shard denies, the last three by the store", cost: 2, start: 0, tries: 4},
		{name: "every shard denies from memory: one cached denial", cost: 2, start: 0, tries: 4, cached: 1},
		{name: "again: one more", cost: 2, start: 3, tries: 4, cached: 2},
	}
	for i, s := range steps {
		d := take(s.name, fmt.Sprint("r", i), s.cost, s.start)
		if d.Allowed != s.allowed || d.Tries != s.tries || len(*hits) != s.cached {
			t.Fatalf("step %d (%s): allowed %v after %d tries, OnCached %d times %v; want allowed %v, %d tries, %d",
				i, s.name, d.Allowed, d.Tries, len(*hits), *hits, s.allowed, s.tries, s.cached)
		}
	}
}
