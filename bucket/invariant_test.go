package bucket_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/bucket/storetest"
)

// TestSimulatedRun walks a long run of random requests and reconciliations on
// fixed instants, through the pure arithmetic and the memory store in lock
// step. After every admitted take of a positive cost (the bucket is then not
// in debt) the net cost admitted (takes plus deltas) stays within capacity +
// rate × elapsed, and the store decides exactly as the
// arithmetic does.
func TestSimulatedRun(t *testing.T) {
	for _, l := range []bucket.Limit{
		{Capacity: 50, Rate: 20, Per: time.Second},
		{Capacity: 20_000, Rate: 10_000, Per: time.Minute},
		{Capacity: 5_000_000, Rate: 1_000_000, Per: time.Hour}, // $5 burst, $1/h in µUSD
	} {
		t.Run(fmt.Sprintf("%d per %v burst %d", l.Rate, l.Per, l.Capacity), func(t *testing.T) {
			simulate(t, l)
		})
	}
}

func simulate(t *testing.T, l bucket.Limit) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, uint64(l.Capacity)))
	clock := storetest.NewClock(storetest.Start)
	store := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	defer store.Close()
	items := []bucket.Item{{Key: "k", Limit: l}}

	var (
		s        bucket.State
		now      = storetest.Start
		net      float64 // units admitted, plus deltas
		admitted int
		meanGap  = time.Duration(float64(l.Per) * float64(l.Capacity) / float64(l.Rate) / 20)
	)
	for i := range 20000 {
		now = now.Add(time.Duration(r.Int64N(int64(meanGap)*2)) / time.Microsecond * time.Microsecond)
		clock.Set(now)
		if i%1000 == 999 {
			store.Sweep() // forgetting a full bucket must not change a decision
		}

		if i%5 == 4 && admitted > 0 { // usage for an earlier request came in
			units := r.Int64N(l.Capacity/2+1) - l.Capacity/4
			s, _ = bucket.Apply(s, l, now, units)
			if err := store.Reconcile(ctx, fmt.Sprint("req-", i), []bucket.Delta{{Key: "k", Limit: l, Units: units}}); err != nil {
				t.Fatal(err)
			}
			net += float64(units)
			continue
		}

		cost := r.Int64N(l.Capacity/3 + 1)
		if r.IntN(50) == 0 {
			cost = l.Capacity + 1
		}
		var v bucket.Verdict
		s, v = bucket.Take(s, l, now, cost)
		items[0].Cost = cost
		d, err := store.Take(ctx, "", items)
		if err != nil {
			t.Fatal(err)
		}
		want := bucket.Decision{Allowed: v.OK, DeniedBy: -1, TooLarge: v.TooLarge, RetryAfter: v.Wait}
		if !v.OK {
			want.DeniedBy = 0
		}
		if d.Allowed != want.Allowed || d.DeniedBy != want.DeniedBy || d.TooLarge != want.TooLarge ||
			d.RetryAfter != want.RetryAfter || d.Buckets[0] != v.Status {
			t.Fatalf("request %d at +%v cost %d: store decided %+v, arithmetic %+v %+v", i, now.Sub(storetest.Start), cost, d, want, v.Status)
		}
		if !v.OK {
			continue
		}
		admitted++
		net += float64(cost)
		if cost == 0 {
			continue // passes even in debt, where the bound does not hold
		}
		elapsed := float64(now.Sub(storetest.Start) / time.Microsecond)
		bound := float64(l.Capacity) + elapsed*float64(l.Rate)/float64(l.Per/time.Microsecond)
		if net > bound+1e-6 {
			t.Fatalf("request %d at +%v: %v units admitted net, over the bound %v", i, now.Sub(storetest.Start), net, bound)
		}
	}
	if admitted < 1000 {
		t.Fatalf("only %d requests admitted: the run does not exercise the bucket", admitted)
	}
}
