package bucket_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
	"github.com/llmguard/llmguard/internal/redistest"
)

// A fleet of nodes, each a Leased over its own Redis store on one shared
// Redis (or Redis Cluster), never admits more than each bucket allows:
// capacity + rate × elapsed, checked after every step of a simulated run on
// an injected clock, while two nodes die holding leases (dropped without
// returning them).
func TestLeaseFleetRedis(t *testing.T) {
	leaseFleet(t, redistest.Shared(t).Client())
}

// The same over a Redis Cluster of three masters: a request's buckets lie
// in two slots (its tenant's and {global}), so each take runs one script
// per slot group, all at once, and refunds the groups that took on a denial.
func TestLeaseFleetCluster(t *testing.T) {
	leaseFleet(t, redistest.SharedCluster(t, 3).Client())
}

// fleetBucket is one bucket the fleet takes from, and what it admitted.
type fleetBucket struct {
	item     bucket.Item // cost set per request
	admitted int64       // units admitted by every node
	// upTo[k] is admitted at the end of step k, out[k] the units the live
	// nodes' leases held at its start (the stepped run).
	upTo, out []int64
	// excess is the most a window admitted beyond capacity + rate × window.
	excess int64
}

// windowBound is what the fleet may admit within any window of length w
// that starts with out units outstanding in the live nodes' leases
// (LeaseStats.Outstanding): capacity + rate × w + out. While lease units
// are out, the shared bucket refills the room they left, so a window that
// starts mid-run may admit those units on top of a full bucket; from the
// start of the run (nothing out) the bound is capacity + rate × w.
func (b *fleetBucket) windowBound(w time.Duration, out int64) int64 {
	return b.bound(w) + out
}

// bound is what the bucket may have admitted by elapsed: capacity + rate ×
// elapsed / per, rounded down.
func (b *fleetBucket) bound(elapsed time.Duration) int64 {
	l := b.item.Limit
	return l.Capacity + int64(elapsed/time.Microsecond)*l.Rate/int64(l.Per/time.Microsecond)
}

func fleetBuckets(run string) (user, tenant1, tenant2, global *fleetBucket) {
	tb := func(key string, capacity, rate, size int64, ttl time.Duration) *fleetBucket {
		it := bucket.Item{Key: key, Limit: bucket.Limit{Capacity: capacity, Rate: rate, Per: time.Second}}
		if size > 0 {
			it.Lease = bucket.Lease{Size: size, TTL: ttl, Label: key}
		}
		return &fleetBucket{item: it}
	}
	return tb("llmguard:{t1"+run+"}:user:alice", 60, 50, 0, 0),
		tb("llmguard:{t1"+run+"}:tenant:t1", 200, 400, 30, 100*time.Millisecond),
		tb("llmguard:{t2"+run+"}:tenant:t2", 150, 300, 25, 100*time.Millisecond),
		tb("llmguard:{global}:g"+run, 400, 1000, 50, 50*time.Millisecond)
}

func leaseFleet(t *testing.T, client bucket.RedisScripter) {
	t.Run("stepped", func(t *testing.T) { fleetStepped(t, client) })
	t.Run("concurrent", func(t *testing.T) { fleetConcurrent(t, client) })
	t.Run("dead node", func(t *testing.T) { fleetDeadNode(t, client) })
}

// fleetStepped walks 600 steps of 5ms: light traffic (the leased buckets
// stay near full, leases are taken whole), then far more than the buckets
// refill, then light again; node 1 dies at step 150 and node 2 at step 300,
// each holding the leases it took in that step.
func fleetStepped(t *testing.T, client bucket.RedisScripter) {
	clock := storetest.NewClock(storetest.Start)
	user, t1, t2, global := fleetBuckets(fmt.Sprint("s", time.Now().UnixNano()))
	all := []*fleetBucket{user, t1, t2, global}
	kinds := [][]*fleetBucket{{user, t1, global}, {t2, global}, {t1}, {global}}
	const nodes = 4
	live := make([]*bucket.Leased, nodes)
	for i := range live {
		live[i] = bucket.NewLeased(newRedis(t, bucket.RedisOptions{Client: client, Now: clock.Now}),
			bucket.LeaseOptions{Now: clock.Now, SweepEvery: -1})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	var requests, admitted int
	heavyFrom := map[*fleetBucket]int64{}
	// Each step's instant: 5ms apart, or later when the run falls behind
	// the wall clock, which counts the buckets' TTLs on Redis
	// (storetest.Pacer); windows are measured between these instants.
	var at []time.Time
	pace := storetest.NewPacer(storetest.Start)
	for step := range 600 {
		at = append(at, pace.Step(storetest.Start.Add(time.Duration(step)*5*time.Millisecond)))
		clock.Set(at[step])
		heavy := step >= 200 && step < 400
		if step == 200 || step == 400 {
			for _, b := range all {
				heavyFrom[b] = b.admitted - heavyFrom[b]
			}
		}
		for _, b := range all {
			out := int64(0)
			for _, l := range live {
				if l != nil {
					out += l.Stats()[b.item.Key].Outstanding
				}
			}
			b.out = append(b.out, out)
		}
		for n, l := range live {
			if l == nil {
				continue
			}
			count := 0 // light: one request every third step
			if rng.IntN(3) == 0 {
				count = 1
			}
			if heavy {
				count = rng.IntN(9) // far more than the buckets refill
			}
			for r := range count {
				kind := kinds[rng.IntN(len(kinds))]
				items := make([]bucket.Item, len(kind))
				for i, b := range kind {
					items[i] = b.item
					items[i].Cost = 1 + rng.Int64N(4)
				}
				d, err := l.Take(ctx, fmt.Sprintf("n%d-s%d-r%d", n, step, r), items)
				if err != nil {
					t.Fatalf("step %d node %d: %v", step, n, err)
				}
				requests++
				if !d.Allowed {
					continue
				}
				admitted++
				for i, b := range kind {
					b.admitted += items[i].Cost
				}
			}
			if step%4 == n%4 {
				if err := l.Sweep(clock.Now()); err != nil {
					t.Fatal(err)
				}
			}
		}
		if step == 150 || step == 300 {
			held := int64(0)
			for _, st := range live[step/150].Stats() {
				held += st.Outstanding
			}
			t.Logf("step %d: node %d dies holding %d units in leases", step, step/150, held)
			if step == 150 && held == 0 {
				t.Errorf("node 1 dies holding no lease: the test proves nothing about dead nodes")
			}
			live[step/150] = nil // its leases are never returned
		}
		elapsed := clock.Now().Sub(storetest.Start)
		for _, b := range all {
			if b.admitted > b.bound(elapsed) {
				t.Fatalf("step %d (+%v): %s admitted %d units > capacity + rate × elapsed = %d",
					step, elapsed, b.item.Key, b.admitted, b.bound(elapsed))
			}
			// Every window [from, step], both ends included.
			b.upTo = append(b.upTo, b.admitted)
			for from := range step {
				in := b.admitted
				if from > 0 {
					in -= b.upTo[from-1]
				}
				w := at[step].Sub(at[from])
				if in > b.windowBound(w, b.out[from]) {
					t.Fatalf("steps %d..%d (%v): %s admitted %d units > capacity + rate × window + %d outstanding = %d",
						from, step, w, b.item.Key, in, b.out[from], b.windowBound(w, b.out[from]))
				}
				b.excess = max(b.excess, in-b.bound(w))
			}
		}
	}
	elapsed := clock.Now().Sub(storetest.Start)
	for _, b := range all {
		t.Logf("%s: admitted %d of %d (capacity + rate × elapsed); at most %d units beyond capacity + rate × window in a window",
			b.item.Key, b.admitted, b.bound(elapsed), b.excess)
	}
	t.Logf("%d requests, %d admitted", requests, admitted)
	// Not vacuous: through the heavy phase (1s) the fleet admitted at
	// least 90% of what the refill allowed: leases shrank rather than
	// starve the other nodes.
	for _, b := range []*fleetBucket{t1, global} {
		refilled := b.item.Limit.Rate // per second: the heavy phase's length
		t.Logf("%s: heavy phase admitted %d, refill %d", b.item.Key, heavyFrom[b], refilled)
		if heavyFrom[b] < refilled*9/10 {
			t.Errorf("%s admitted %d units in the heavy phase, under 90%% of the %d it refilled: leases starved the fleet",
				b.item.Key, heavyFrom[b], refilled)
		}
	}
	for _, l := range live {
		if l != nil {
			l.Close()
		}
	}
}

// fleetConcurrent runs four nodes in goroutines over one bucket set, the
// clock moving 200µs per request; one node stops early without returning
// its leases.
func fleetConcurrent(t *testing.T, client bucket.RedisScripter) {
	var ticks atomic.Int64
	now := func() time.Time { return storetest.Start.Add(time.Duration(ticks.Load()) * 200 * time.Microsecond) }
	_, t1, _, global := fleetBuckets(fmt.Sprint("c", time.Now().UnixNano()))
	const nodes, each = 4, 400
	var mu sync.Mutex
	var wg sync.WaitGroup
	for n := range nodes {
		l := bucket.NewLeased(newRedis(t, bucket.RedisOptions{Client: client, Now: now}), bucket.LeaseOptions{Now: now, SweepEvery: -1})
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(n), 7))
			requests := each
			if n == 0 {
				requests = each / 4 // then dies, its leases held
			}
			for r := range requests {
				items := []bucket.Item{t1.item, global.item}
				items[0].Cost, items[1].Cost = 1+rng.Int64N(3), 1+rng.Int64N(3)
				d, err := l.Take(context.Background(), fmt.Sprintf("c%d-%d", n, r), items)
				ticks.Add(1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					mu.Lock()
					t1.admitted += items[0].Cost
					global.admitted += items[1].Cost
					mu.Unlock()
				}
				if r%16 == 0 {
					l.Sweep(now())
				}
			}
			if n != 0 {
				l.Close()
			}
		}()
	}
	wg.Wait()
	elapsed := now().Sub(storetest.Start)
	for _, b := range []*fleetBucket{t1, global} {
		t.Logf("%s: admitted %d of %d (capacity + rate × elapsed)", b.item.Key, b.admitted, b.bound(elapsed))
		if b.admitted > b.bound(elapsed) {
			t.Errorf("%s admitted %d units > capacity + rate × elapsed = %d", b.item.Key, b.admitted, b.bound(elapsed))
		}
	}
}

// fleetDeadNode: a node that dies loses at most its lease, which the shared
// bucket regains by refilling within size × per / rate.
func fleetDeadNode(t *testing.T, client bucket.RedisScripter) {
	clock := storetest.NewClock(storetest.Start)
	_, t1, _, _ := fleetBuckets(fmt.Sprint("d", time.Now().UnixNano()))
	dead := bucket.NewLeased(newRedis(t, bucket.RedisOptions{Client: client, Now: clock.Now}), bucket.LeaseOptions{Now: clock.Now, SweepEvery: -1})
	it := t1.item
	it.Cost = 1
	if d, err := dead.Take(context.Background(), "d-1", []bucket.Item{it}); err != nil || !d.Allowed {
		t.Fatalf("take: %+v %v", d, err)
	}
	held := dead.Stats()[it.Lease.Label].Outstanding
	if held <= 0 || held > it.Lease.Size {
		t.Fatalf("lease of %d units, want 1..%d", held, it.Lease.Size)
	}
	dead = nil // dies: the lease is never returned
	r := newRedis(t, bucket.RedisOptions{Client: client, Now: clock.Now})
	level := func() int64 {
		d, err := r.Take(context.Background(), "", []bucket.Item{{Key: it.Key, Limit: it.Limit}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Buckets[0].Remaining
	}
	if got, want := level(), it.Limit.Capacity-1-held; got != want {
		t.Errorf("level %d after the node died, want %d", got, want)
	}
	// The lease and the request refill in (held + 1) × per / rate.
	refill := time.Duration(held+1) * it.Limit.Per / time.Duration(it.Limit.Rate)
	clock.Set(storetest.Start.Add(refill))
	if got := level(); got != it.Limit.Capacity {
		t.Errorf("level %d after %v, want %d: full again", got, refill, it.Limit.Capacity)
	}
}
