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
)

const hammerFor = time.Second

// TestHammerOneKey runs 64 goroutines taking from one bucket on the real
// clock. Whatever the interleaving, the units admitted stay within capacity +
// rate × the time the run took.
func TestHammerOneKey(t *testing.T) {
	l := bucket.Limit{Capacity: 50, Rate: 200, Per: time.Second}
	m := bucket.NewMemory(bucket.MemoryOptions{SweepEvery: time.Millisecond})
	defer m.Close()

	var admitted, denied atomic.Int64
	start := time.Now()
	hammer(t, func(r *rand.Rand) {
		cost := r.Int64N(5) + 1
		d, err := m.Take(context.Background(), "", []bucket.Item{{Key: "one", Limit: l, Cost: cost}})
		if err != nil {
			t.Error(err)
			return
		}
		if d.Allowed {
			admitted.Add(cost)
		} else {
			denied.Add(1)
		}
	})
	elapsed := time.Since(start)

	checkBound(t, "one", l, admitted.Load(), elapsed)
	if admitted.Load() == 0 || denied.Load() == 0 {
		t.Fatalf("admitted %d units, denied %d requests: the run did not reach the limit", admitted.Load(), denied.Load())
	}
}

// TestHammerTwoPhase runs 64 goroutines taking from three buckets at once:
// a ledger that always has room (so its level counts exactly what was
// admitted), the goroutine's own bucket and a shared one, in an order that
// has denials come both after and before a bucket that could pay. A denied
// request must take nothing from any bucket: the ledger's level ends at
// exactly its capacity less the units admitted.
func TestHammerTwoPhase(t *testing.T) {
	var (
		ledger = bucket.Limit{Capacity: 1 << 40, Rate: 1, Per: 24 * time.Hour} // refills 1 unit a day: none during the run
		own    = bucket.Limit{Capacity: 20, Rate: 100, Per: time.Second}
		shared = bucket.Limit{Capacity: 100, Rate: 1000, Per: time.Second}
	)
	m := bucket.NewMemory(bucket.MemoryOptions{Shards: 4, SweepEvery: time.Millisecond})
	defer m.Close()

	var (
		total   atomic.Int64
		perOwn  [goroutines]atomic.Int64
		denials atomic.Int64
		next    atomic.Int64
	)
	start := time.Now()
	hammer(t, func(r *rand.Rand) {
		g := int(next.Add(1) % goroutines)
		cost := r.Int64N(5) + 1
		items := []bucket.Item{
			{Key: fmt.Sprint("own-", g), Limit: own, Cost: cost},
			{Key: "ledger", Limit: ledger, Cost: cost},
			{Key: "shared", Limit: shared, Cost: cost},
		}
		d, err := m.Take(context.Background(), "", items)
		if err != nil {
			t.Error(err)
			return
		}
		if !d.Allowed {
			denials.Add(1)
			return
		}
		total.Add(cost)
		perOwn[g].Add(cost)
	})
	elapsed := time.Since(start)

	checkBound(t, "shared", shared, total.Load(), elapsed)
	for g := range perOwn {
		checkBound(t, fmt.Sprint("own-", g), own, perOwn[g].Load(), elapsed)
	}
	d, err := m.Take(context.Background(), "", []bucket.Item{{Key: "ledger", Limit: ledger}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Buckets[0].Remaining, ledger.Capacity-total.Load(); got != want {
		t.Fatalf("ledger holds %d, want %d (capacity less the %d units admitted): a denied request took from it", got, want, total.Load())
	}
	if total.Load() == 0 || denials.Load() == 0 {
		t.Fatalf("admitted %d units, denied %d requests: the run did not reach the limits", total.Load(), denials.Load())
	}
}

// TestConcurrentReconcileAppliesOnce retries one request's reconciliation
// from 64 goroutines at once.
func TestConcurrentReconcileAppliesOnce(t *testing.T) {
	l := bucket.Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	now := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	m := bucket.NewMemory(bucket.MemoryOptions{Now: func() time.Time { return now }, SweepEvery: -1})
	defer m.Close()

	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			err := m.Reconcile(context.Background(), "req-1", []bucket.Delta{{Key: "a", Limit: l, Units: 7}, {Key: "b", Limit: l, Units: 3}})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	d, err := m.Take(context.Background(), "", []bucket.Item{{Key: "a", Limit: l}, {Key: "b", Limit: l}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Buckets[0].Remaining != 993 || d.Buckets[1].Remaining != 997 {
		t.Fatalf("after 64 retries of one reconcile: %+v, want 993 and 997 remaining", d.Buckets)
	}
}

const goroutines = 64

// hammer calls f from 64 goroutines, each with its own random source, until
// hammerFor has passed.
func hammer(t *testing.T, f func(r *rand.Rand)) {
	t.Helper()
	deadline := time.Now().Add(hammerFor)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 99))
			for time.Now().Before(deadline) {
				f(r)
			}
		})
	}
	wg.Wait()
}

// checkBound fails when more than capacity + rate × elapsed units were
// admitted. elapsed is measured around the whole run, so it covers the
// bucket's life; the store reads the clock at microsecond resolution, which
// can add up to 1µs of refill.
func checkBound(t *testing.T, key string, l bucket.Limit, admitted int64, elapsed time.Duration) {
	t.Helper()
	bound := float64(l.Capacity) + float64(elapsed+time.Microsecond)*float64(l.Rate)/float64(l.Per)
	if float64(admitted) > bound {
		t.Errorf("%s: %d units admitted in %v, over the bound %.3f", key, admitted, elapsed, bound)
	}
}
