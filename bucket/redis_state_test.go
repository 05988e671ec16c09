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

// The keys of a tiered request, as policy.Rule.Key builds them: a user's and
// its tenant's buckets share the tenant's hash tag; the global bucket has
// its own.
const (
	userKey   = "llmguard:{acme}:tpm:alice"
	tenantKey = "llmguard:{acme}:tpm:acme"
	globalKey = "llmguard:{global}:tpm"
)

var (
	userLimit   = bucket.Limit{Capacity: 100, Rate: 100, Per: time.Minute}
	tenantLimit = bucket.Limit{Capacity: 10, Rate: 10, Per: time.Second}
	globalLimit = bucket.Limit{Capacity: 1000, Rate: 1000, Per: time.Second}
)

func tiered(user, tenant, global int64) []bucket.Item {
	return []bucket.Item{
		{Key: userKey, Limit: userLimit, Cost: user},
		{Key: tenantKey, Limit: tenantLimit, Cost: tenant},
		{Key: globalKey, Limit: globalLimit, Cost: global},
	}
}

// TestRedisTiered takes from a user, its tenant and a global bucket at once.
// When one of them denies, the others are read back from Redis unchanged, and
// the decision is the one the memory store makes on the same clock. On a
// cluster the global bucket lies in another slot: a denial by the tenant
// never touches it, and a denial by the global bucket refunds the user and
// tenant buckets its group had already taken from.
func TestRedisTiered(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		mr.SetTime(storetest.Start)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		testTiered(t, c, c, nil)
	})
	t.Run("redis-server", func(t *testing.T) {
		c := redistest.Shared(t).Client()
		testTiered(t, c, c, storetest.NewClock(storetest.Start))
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.SharedCluster(t, 3).Client()
		ctx := context.Background()
		if a, b := c.ClusterKeySlot(ctx, tenantKey).Val(), c.ClusterKeySlot(ctx, globalKey).Val(); a == b {
			t.Fatalf("tenant and global keys share slot %d: the test needs two", a)
		}
		testTiered(t, c, c, storetest.NewClock(storetest.Start))
	})
}

// testTiered runs the tiered steps; a nil clock means Redis TIME (miniredis,
// whose time is fixed).
func testTiered(t *testing.T, client bucket.RedisScripter, kv redis.Cmdable, clock *storetest.Clock) {
	ctx := context.Background()
	o := bucket.RedisOptions{Client: client}
	memClock := storetest.NewClock(storetest.Start)
	if clock != nil {
		o.Now = clock.Now
	}
	r := newRedis(t, o)
	m := bucket.NewMemory(bucket.MemoryOptions{Now: memClock.Now, SweepEvery: -1})
	defer m.Close()
	for _, k := range []string{userKey, tenantKey, globalKey} {
		if err := kv.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}

	raw := func() [3]string {
		var out [3]string
		for i, k := range []string{userKey, tenantKey, globalKey} {
			out[i] = kv.Get(ctx, k).Val()
		}
		return out
	}
	take := func(step string, items []bucket.Item, wantAllowed bool, wantBy int) bucket.Decision {
		t.Helper()
		got, err := r.Take(ctx, "", items)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		want, _ := m.Take(ctx, "", items)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: Redis decided %+v, memory %+v", step, got, want)
		}
		if got.Allowed != wantAllowed || got.DeniedBy != wantBy {
			t.Errorf("%s: allowed=%v deniedBy=%d, want %v, %d", step, got.Allowed, got.DeniedBy, wantAllowed, wantBy)
		}
		return got
	}

	take("step 1 (all pay)", tiered(20, 6, 200), true, -1)
	before := raw()
	for i, v := range before {
		if v == "" {
			t.Fatalf("step 1: key %d not stored", i)
		}
	}
	t.Logf("after step 1: user %q, tenant %q, global %q", before[0], before[1], before[2])

	d := take("step 2 (tenant short by 1)", tiered(20, 5, 200), false, 1)
	if d.RetryAfter != 100*time.Millisecond {
		t.Errorf("step 2: RetryAfter %v, want 100ms", d.RetryAfter)
	}
	if after := raw(); after != before {
		t.Errorf("step 2: a denial changed Redis:\n\tbefore %q\n\tafter  %q", before, after)
	}

	take("step 3 (global too large: the user and tenant are refunded on a cluster)", tiered(20, 1, 1001), false, 2)
	if after := raw(); after != before {
		t.Errorf("step 3: a denial changed Redis:\n\tbefore %q\n\tafter  %q", before, after)
	}

	take("step 4 (global short after the tenant paid)", tiered(1, 1, 801), false, 2)
	if after := raw(); after != before {
		t.Errorf("step 4: a denial changed Redis:\n\tbefore %q\n\tafter  %q", before, after)
	}

	take("step 5 (all pay again)", tiered(1, 4, 800), true, -1)
	if after := raw(); after == before {
		t.Error("step 5: an admission changed nothing")
	}
}

// TestRedisTTL checks, on a real redis-server with its own clock (TIME), that
// every key written expires just past the time its bucket is full again: at
// least the time until full from its level, and at most a full refill from
// empty plus one second (in debt: the time until full plus one second, so
// that the debt is not forgiven); a bucket left full is deleted; the
// reconcile marker lives DedupFor.
func TestRedisTTL(t *testing.T) {
	ctx := context.Background()
	c := redistest.Shared(t).Client()
	r := newRedis(t, bucket.RedisOptions{Client: c, DedupFor: time.Minute})
	ten := bucket.Limit{Capacity: 10, Rate: 10, Per: time.Second}        // full from empty in 1s
	day := bucket.Limit{Capacity: 1e12, Rate: 1e12, Per: 24 * time.Hour} // in 24h

	pttl := func(key string) time.Duration {
		t.Helper()
		d, err := c.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	take := func(key string, l bucket.Limit, cost int64) bucket.Status {
		t.Helper()
		d, err := r.Take(ctx, "", []bucket.Item{{Key: key, Limit: l, Cost: cost}})
		if err != nil || !d.Allowed {
			t.Fatalf("take %d from %s: %+v, %v", cost, key, d, err)
		}
		return d.Buckets[0]
	}
	reconcile := func(id, key string, l bucket.Limit, units int64) {
		t.Helper()
		if err := r.Reconcile(ctx, id, []bucket.Delta{{Key: key, Limit: l, Units: units}}); err != nil {
			t.Fatal(err)
		}
	}
	within := func(step, key string, least, most time.Duration) {
		t.Helper()
		if got := pttl(key); got < least || got > most {
			t.Errorf("%s: PTTL %v, want in [%v, %v]", step, got, least, most)
		}
	}

	st := take("ttl:{t}:a", ten, 4)
	within("take 4 of 10", "ttl:{t}:a", st.Reset, time.Second+time.Second)

	st = take("ttl:{t}:b", ten, 10)
	within("drain", "ttl:{t}:b", st.Reset, time.Second+time.Second)

	reconcile("r1", "ttl:{t}:b", ten, 5) // 5 into debt: full again in 1.5s
	within("in debt", "ttl:{t}:b", 1500*time.Millisecond-5*time.Millisecond, 1500*time.Millisecond+time.Second)
	within("marker", "llmguard:{t}::rc:r1", time.Minute-time.Second, time.Minute)

	st = take("ttl:{t}:c", day, 1)
	within("one µUSD of $1M/day", "ttl:{t}:c", st.Reset, time.Second+time.Millisecond)

	st = take("ttl:{t}:d", day, 5e11)
	within("half a day's budget", "ttl:{t}:d", st.Reset, 12*time.Hour+time.Second)

	take("ttl:{t}:e", ten, 3)
	reconcile("r2", "ttl:{t}:e", ten, -3)
	if n := c.Exists(ctx, "ttl:{t}:e").Val(); n != 0 {
		t.Errorf("a refund that fills the bucket left its key (PTTL %v)", pttl("ttl:{t}:e"))
	}

	// A cost-zero read of a bucket not yet full rewrites it with its TTL; a
	// new bucket read at cost zero is not written at all.
	take("ttl:{t}:f", ten, 0)
	if n := c.Exists(ctx, "ttl:{t}:f").Val(); n != 0 {
		t.Error("a cost-zero read of a new bucket wrote a key")
	}

	// Once a key expires, the bucket is full: nothing was lost.
	take("ttl:{t}:g", bucket.Limit{Capacity: 2, Rate: 2, Per: time.Millisecond}, 2) // full in 1ms, key lives ~1s
	within("full in 1ms", "ttl:{t}:g", time.Millisecond, time.Millisecond+time.Second)
}

// TestRedisNoScript flushes the script cache of a real redis-server: the
// next take and a pipelined batch of reconciles find no script by SHA (as
// after a restart) and fall back to EVAL, which caches them again.
func TestRedisNoScript(t *testing.T) {
	ctx := context.Background()
	c := redistest.Shared(t).Client()
	r := newRedis(t, bucket.RedisOptions{Client: c})
	ten := bucket.Limit{Capacity: 10, Rate: 10, Per: time.Hour}

	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	d, err := r.Take(ctx, "", []bucket.Item{{Key: "ns:{a}:x", Limit: ten, Cost: 4}})
	if err != nil || !d.Allowed || d.Buckets[0].Remaining != 6 {
		t.Fatalf("take after SCRIPT FLUSH: %+v, %v", d, err)
	}

	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	errs := r.ReconcileBatch(ctx, []bucket.Reconciliation{
		{RequestID: "r1", Deltas: []bucket.Delta{{Key: "ns:{a}:x", Limit: ten, Units: -1}}},
		{RequestID: "r2", Deltas: []bucket.Delta{{Key: "ns:{a}:x", Limit: ten, Units: -2}}},
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("batch %d after SCRIPT FLUSH: %v", i, err)
		}
	}
	d, err = r.Take(ctx, "", []bucket.Item{{Key: "ns:{a}:x", Limit: ten, Cost: 0}})
	if err != nil || d.Buckets[0].Remaining != 9 {
		t.Fatalf("read back after the batch: %+v, %v; want 9 remaining", d, err)
	}
}

// TestRedisClusterNoScript flushes every master's script cache: a take over
// two slots that a later slot denies (one take, then a pipeline of refunds
// and checks) still works.
func TestRedisClusterNoScript(t *testing.T) {
	ctx := context.Background()
	c := redistest.SharedCluster(t, 3).Client()
	r := newRedis(t, bucket.RedisOptions{Client: c})
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	d, err := r.Take(ctx, "", tiered(10, 1, 2000))
	if err != nil || d.Allowed || !d.TooLarge || d.DeniedBy != 2 {
		t.Fatalf("take after SCRIPT FLUSH: %+v, %v", d, err)
	}
	if n := c.Exists(ctx, userKey).Val() + c.Exists(ctx, tenantKey).Val(); n != 0 {
		t.Fatalf("the refunded buckets were left with keys (%d)", n)
	}
}

// TestRedisMemoryUsage reports MEMORY USAGE of one bucket key as the scripts
// store it (a string '<level> <updated>'), next to the hash the design
// weighed against it, on a real redis-server.
func TestRedisMemoryUsage(t *testing.T) {
	ctx := context.Background()
	c := redistest.Shared(t).Client()
	r := newRedis(t, bucket.RedisOptions{Client: c})
	thirds := bucket.Limit{Capacity: 20000, Rate: 10000, Per: time.Minute}
	const key = "llmguard:{acme}:tpm:user-42"
	if _, err := r.Take(ctx, "", []bucket.Item{{Key: key, Limit: thirds, Cost: 1501}}); err != nil {
		t.Fatal(err)
	}
	// Let the level become fractional, as it mostly is.
	time.Sleep(3 * time.Millisecond)
	if _, err := r.Take(ctx, "", []bucket.Item{{Key: key, Limit: thirds, Cost: 1}}); err != nil {
		t.Fatal(err)
	}
	v := c.Get(ctx, key).Val()
	str, err := c.MemoryUsage(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	level, updated, _ := stringsCut(v)
	const hkey = "llmguard:{acme}:tpm:user-43"
	c.HSet(ctx, hkey, "level", level, "updated", updated)
	c.PExpire(ctx, hkey, time.Minute)
	hash, err := c.MemoryUsage(ctx, hkey).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEMORY USAGE of one bucket key %q = %q: %d bytes (string); as a hash {level, updated}: %d bytes", key, v, str, hash)
	if str > hash {
		t.Errorf("the string (%d bytes) is larger than the hash (%d bytes): the design should store hashes", str, hash)
	}
}

func stringsCut(v string) (string, string, bool) {
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' {
			return v[:i], v[i+1:], true
		}
	}
	return v, "", false
}
