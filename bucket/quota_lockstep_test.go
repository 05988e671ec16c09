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

// TestQuotaSimulatedRun is TestSimulatedRun for a quota: a long run of random
// takes and reconciliations over several windows, through the pure quota
// arithmetic (TakeQuota, ApplyQuota) and the memory store in lock step. The
// store must decide exactly as the arithmetic does, so the exported functions
// the golden tests compare with Lua are what the store runs.
func TestQuotaSimulatedRun(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(11, 3))
	clock := storetest.NewClock(storetest.Start)
	store := bucket.NewMemory(bucket.MemoryOptions{Now: clock.Now, SweepEvery: -1})
	defer store.Close()

	const capacity = 1000
	period := time.Hour
	var (
		s                  bucket.QuotaState
		now                = storetest.Start
		denied, admitted   int
		large, windowsSeen int
		lastWindow         time.Time
	)
	for i := range 20000 {
		now = now.Add(time.Duration(r.Int64N(int64(period/200))) / time.Microsecond * time.Microsecond)
		clock.Set(now)
		if i%1000 == 999 {
			store.Sweep() // forgetting a quota must not change a decision
		}
		start := storetest.Start.Add(now.Sub(storetest.Start) / period * period)
		if !start.Equal(lastWindow) {
			windowsSeen++
			lastWindow = start
		}
		l := bucket.Quota(capacity, start, start.Add(period))

		if i%5 == 4 { // usage for an earlier request came in
			units := r.Int64N(capacity/2+1) - capacity/4
			s, _ = bucket.ApplyQuota(s, l, now, units)
			if err := store.Reconcile(ctx, fmt.Sprint("req-", i), []bucket.Delta{{Key: "q", Limit: l, Units: units}}); err != nil {
				t.Fatal(err)
			}
			continue
		}

		cost := r.Int64N(capacity/20 + 1)
		if r.IntN(50) == 0 {
			cost = capacity + 1
		}
		var v bucket.Verdict
		s, v = bucket.TakeQuota(s, l, now, cost)
		d, err := store.Take(ctx, "", []bucket.Item{{Key: "q", Limit: l, Cost: cost}})
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
		switch {
		case v.TooLarge:
			large++
		case !v.OK:
			denied++
		default:
			admitted++
		}
	}
	if admitted < 1000 || denied < 100 || large < 10 || windowsSeen < 10 {
		t.Fatalf("admitted %d, denied %d, too large %d over %d windows: the run does not exercise the quota", admitted, denied, large, windowsSeen)
	}
}
