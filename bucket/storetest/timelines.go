package storetest

import (
	"fmt"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

const (
	ms = time.Millisecond
	µs = time.Microsecond
)

// The limits the timelines use, with the time one unit takes to refill.
var (
	tenPerSecond  = bucket.Limit{Capacity: 10, Rate: 10, Per: time.Second}        // 1 unit per 100ms
	fivePerSecond = bucket.Limit{Capacity: 5, Rate: 10, Per: time.Second}         // tenPerSecond with a lower capacity
	fourSlow      = bucket.Limit{Capacity: 4, Rate: 1, Per: time.Second}          // 1 unit per second
	fiveSlow      = bucket.Limit{Capacity: 5, Rate: 1, Per: time.Second}          // 1 unit per second
	thirds        = bucket.Limit{Capacity: 3, Rate: 2, Per: 3 * time.Second}      // 1 unit per 1.5s
	fractionalµs  = bucket.Limit{Capacity: 10, Rate: 3, Per: time.Millisecond}    // 1 unit per 333.3…µs
	microUSD      = bucket.Limit{Capacity: 1e12, Rate: 1e12, Per: 24 * time.Hour} // $1M a day, in µUSD
)

var timelines = []timeline{
	{name: "a new bucket is full", steps: []step{
		{name: "first take from a new bucket", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}},
			want:  allowed(status(9, 100*ms))},
		{name: "cost zero reads a new bucket as full", at: 0,
			items: []bucket.Item{{Key: "b", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(10, 0))},
		{name: "a new bucket pays its whole capacity", at: 0,
			items: []bucket.Item{{Key: "c", Limit: tenPerSecond, Cost: 10}},
			want:  allowed(status(0, time.Second))},
	}},

	{name: "exact refill", steps: []step{
		{name: "drain", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 10}},
			want:  allowed(status(0, time.Second))},
		{name: "half a unit is not enough", at: 50 * ms,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}},
			want:  denied(0, 50*ms, status(0, 950*ms))},
		{name: "exactly one unit refilled", at: 100 * ms,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}},
			want:  allowed(status(0, time.Second))},
		{name: "a long idle refills to capacity, no more", at: time.Hour,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(10, 0))},
	}},

	{name: "a denial says when to retry", steps: []step{
		{name: "drain", at: 0,
			items: []bucket.Item{{Key: "a", Limit: fiveSlow, Cost: 5}},
			want:  allowed(status(0, 5*time.Second))},
		{name: "2.5 units short", at: 500 * ms,
			items: []bucket.Item{{Key: "a", Limit: fiveSlow, Cost: 3}},
			want:  denied(0, 2500*ms, status(0, 4500*ms))},
		{name: "one microsecond early", at: 3*time.Second - µs,
			items: []bucket.Item{{Key: "a", Limit: fiveSlow, Cost: 3}},
			want:  denied(0, µs, status(2, 2*time.Second+µs))},
		{name: "on time", at: 3 * time.Second,
			items: []bucket.Item{{Key: "a", Limit: fiveSlow, Cost: 3}},
			want:  allowed(status(0, 5*time.Second))},
	}},

	{name: "waits round up to the microsecond", steps: []step{
		{name: "drain: full again in 3333.3µs", at: 0,
			items: []bucket.Item{{Key: "a", Limit: fractionalµs, Cost: 10}},
			want:  allowed(status(0, 3334*µs))},
		{name: "one unit takes 333.3µs", at: 0,
			items: []bucket.Item{{Key: "a", Limit: fractionalµs, Cost: 1}},
			want:  denied(0, 334*µs, status(0, 3334*µs))},
		{name: "at 333µs 0.999 units", at: 333 * µs,
			items: []bucket.Item{{Key: "a", Limit: fractionalµs, Cost: 1}},
			want:  denied(0, µs, status(0, 3001*µs))},
		{name: "at 334µs 1.002 units", at: 334 * µs,
			items: []bucket.Item{{Key: "a", Limit: fractionalµs, Cost: 1}},
			want:  allowed(status(0, 3333*µs))},
	}},

	{name: "remaining rounds down", steps: []step{
		{name: "drain", at: 0,
			items: []bucket.Item{{Key: "a", Limit: thirds, Cost: 3}},
			want:  allowed(status(0, 4500*ms))},
		{name: "two thirds of a unit read as 0", at: time.Second,
			items: []bucket.Item{{Key: "a", Limit: thirds, Cost: 0}},
			want:  allowed(status(0, 3500*ms))},
		{name: "one and a third read as 1", at: 2 * time.Second,
			items: []bucket.Item{{Key: "a", Limit: thirds, Cost: 0}},
			want:  allowed(status(1, 2500*ms))},
		{name: "but do not pay 2", at: 2 * time.Second,
			items: []bucket.Item{{Key: "a", Limit: thirds, Cost: 2}},
			want:  denied(0, time.Second, status(1, 2500*ms))},
	}},

	{name: "a denial spends nothing from any bucket", steps: []step{
		{name: "both pay", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}, {Key: "b", Limit: fourSlow, Cost: 3}},
			want:  allowed(status(7, 300*ms), status(1, 3*time.Second))},
		{name: "b is short, a could pay", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 5}, {Key: "b", Limit: fourSlow, Cost: 2}},
			want:  denied(1, time.Second, status(7, 300*ms), status(1, 3*time.Second))},
		{name: "a is short, b could pay", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 8}, {Key: "b", Limit: fourSlow, Cost: 1}},
			want:  denied(0, 100*ms, status(7, 300*ms), status(1, 3*time.Second))},
		{name: "both short: the one that waits longest names it and its wait", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 8}, {Key: "b", Limit: fourSlow, Cost: 3}},
			want:  denied(1, 2*time.Second, status(7, 300*ms), status(1, 3*time.Second))},
		{name: "both short, the first waits longer: the first names it", at: 0,
			items: []bucket.Item{{Key: "b", Limit: fourSlow, Cost: 3}, {Key: "a", Limit: tenPerSecond, Cost: 8}},
			want:  denied(0, 2*time.Second, status(1, 3*time.Second), status(7, 300*ms))},
		{name: "drain two more alike", at: 0,
			items: []bucket.Item{{Key: "x", Limit: tenPerSecond, Cost: 10}, {Key: "y", Limit: tenPerSecond, Cost: 10}},
			want:  allowed(status(0, time.Second), status(0, time.Second))},
		{name: "both short, waiting as long: the first names it", at: 0,
			items: []bucket.Item{{Key: "y", Limit: tenPerSecond, Cost: 1}, {Key: "x", Limit: tenPerSecond, Cost: 1}},
			want:  denied(0, 100*ms, status(0, time.Second), status(0, time.Second))},
		{name: "read back: nothing was spent", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}, {Key: "b", Limit: fourSlow, Cost: 0}},
			want:  allowed(status(7, 300*ms), status(1, 3*time.Second))},
		{name: "after the longest wait both pay", at: 2 * time.Second,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 8}, {Key: "b", Limit: fourSlow, Cost: 3}},
			want:  allowed(status(2, 800*ms), status(0, 4*time.Second))},
	}},

	{name: "ten buckets in one take", steps: []step{
		{name: "all pay", at: 0,
			items: ten("k", 4, 4),
			want:  allowed(repeat(status(6, 400*ms), 10)...)},
		{name: "the last is short: nothing spent", at: 0,
			items: ten("k", 4, 7),
			want:  denied(9, 100*ms, repeat(status(6, 400*ms), 10)...)},
		{name: "read back", at: 0,
			items: ten("k", 0, 0),
			want:  allowed(repeat(status(6, 400*ms), 10)...)},
	}},

	{name: "a cost above capacity is too large", steps: []step{
		{name: "11 from a bucket of 10", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 11}},
			want:  tooLarge(0, status(10, 0))},
		{name: "10 from a bucket of 10 passes", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 10}},
			want:  allowed(status(0, time.Second))},
		{name: "too large beats an earlier wait and names its bucket", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 5}, {Key: "b", Limit: fourSlow, Cost: 5}},
			want:  tooLarge(1, status(0, time.Second), status(4, 0))},
		{name: "read back: nothing was spent", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}, {Key: "b", Limit: fourSlow, Cost: 0}},
			want:  allowed(status(0, time.Second), status(4, 0))},
	}},

	{name: "a refund clamps at capacity", steps: []step{
		{name: "reserve 4", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 4}},
			want:  allowed(status(6, 400*ms))},
		{name: "refund 3", at: 0, request: "r1",
			deltas: []bucket.Delta{{Key: "a", Limit: tenPerSecond, Units: -3}}},
		{name: "read back 9", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(9, 100*ms))},
		{name: "refund 5 more", at: 0, request: "r2",
			deltas: []bucket.Delta{{Key: "a", Limit: tenPerSecond, Units: -5}}},
		{name: "read back 10, not 14", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(10, 0))},
		{name: "pays 10", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 10}},
			want:  allowed(status(0, time.Second))},
		{name: "and not one more", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}},
			want:  denied(0, 100*ms, status(0, time.Second))},
		{name: "refund to a new bucket", at: 0, request: "r3",
			deltas: []bucket.Delta{{Key: "b", Limit: tenPerSecond, Units: -5}}},
		{name: "it stays full", at: 0,
			items: []bucket.Item{{Key: "b", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(10, 0))},
	}},

	{name: "a charge puts the bucket in debt", steps: []step{
		{name: "drain", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 10}},
			want:  allowed(status(0, time.Second))},
		{name: "usage came in 5 over", at: 0, request: "r1",
			deltas: []bucket.Delta{{Key: "a", Limit: tenPerSecond, Units: 5}}},
		{name: "cost zero still reads a bucket in debt", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(-5, 1500*ms))},
		{name: "the next take waits out the debt", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}},
			want:  denied(0, 600*ms, status(-5, 1500*ms))},
		{name: "half a unit of debt reads as -1", at: 450 * ms,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(-1, 1050*ms))},
		{name: "debt paid, one unit short", at: 500 * ms,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}},
			want:  denied(0, 100*ms, status(0, time.Second))},
		{name: "pays when the wait is over", at: 600 * ms,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}},
			want:  allowed(status(0, time.Second))},
		{name: "a charge to a new bucket", at: 600 * ms, request: "r2",
			deltas: []bucket.Delta{{Key: "b", Limit: tenPerSecond, Units: 15}}},
		{name: "takes it from full", at: 600 * ms,
			items: []bucket.Item{{Key: "b", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(-5, 1500*ms))},
	}},

	{name: "reconcile applies once per request id", steps: []step{
		{name: "reserve 6", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 6}},
			want:  allowed(status(4, 600*ms))},
		{name: "refund 4", at: 0, request: "req-1",
			deltas: []bucket.Delta{{Key: "a", Limit: tenPerSecond, Units: -4}}},
		{name: "read back 8", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(8, 200*ms))},
		{name: "a retry of req-1 is a no-op", at: 0, request: "req-1",
			deltas: []bucket.Delta{{Key: "a", Limit: tenPerSecond, Units: -4}}},
		{name: "even with other deltas", at: 0, request: "req-1",
			deltas: []bucket.Delta{{Key: "a", Limit: tenPerSecond, Units: 8}}},
		{name: "read back still 8", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(8, 200*ms))},
		{name: "another request applies", at: 0, request: "req-2",
			deltas: []bucket.Delta{{Key: "a", Limit: tenPerSecond, Units: 3}}},
		{name: "read back 5", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(5, 500*ms))},
		{name: "two buckets, one key twice", at: 0, request: "req-3",
			deltas: []bucket.Delta{
				{Key: "a", Limit: tenPerSecond, Units: 1},
				{Key: "b", Limit: tenPerSecond, Units: 2},
				{Key: "a", Limit: tenPerSecond, Units: 1},
			}},
		{name: "retried", at: 0, request: "req-3",
			deltas: []bucket.Delta{
				{Key: "a", Limit: tenPerSecond, Units: 1},
				{Key: "b", Limit: tenPerSecond, Units: 2},
				{Key: "a", Limit: tenPerSecond, Units: 1},
			}},
		{name: "read back both, applied once", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}, {Key: "b", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(3, 700*ms), status(8, 200*ms))},
	}},

	{name: "a lowered capacity clamps the level", steps: []step{
		{name: "take 2 of 10", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 2}},
			want:  allowed(status(8, 200*ms))},
		{name: "capacity 5: clamps with no time elapsed", at: 0,
			items: []bucket.Item{{Key: "a", Limit: fivePerSecond, Cost: 0}},
			want:  allowed(status(5, 0))},
		{name: "pays 5", at: 0,
			items: []bucket.Item{{Key: "a", Limit: fivePerSecond, Cost: 5}},
			want:  allowed(status(0, 500*ms))},
		{name: "and not one more", at: 0,
			items: []bucket.Item{{Key: "a", Limit: fivePerSecond, Cost: 1}},
			want:  denied(0, 100*ms, status(0, 500*ms))},
		{name: "capacity back to 10 keeps the level", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(0, time.Second))},
	}},

	{name: "a clock that steps back never refills", steps: []step{
		{name: "drain at 1s", at: time.Second,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 10}},
			want:  allowed(status(0, time.Second))},
		{name: "back to 0.5s: no refill", at: 500 * ms,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}},
			want:  denied(0, 100*ms, status(0, time.Second))},
		{name: "at 1s again: updated did not move back", at: time.Second,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}},
			want:  denied(0, 100*ms, status(0, time.Second))},
		{name: "refills from 1s", at: 1100 * ms,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}},
			want:  allowed(status(0, time.Second))},
		{name: "a refund while the clock is back", at: 200 * ms, request: "r1",
			deltas: []bucket.Delta{{Key: "a", Limit: tenPerSecond, Units: -5}}},
		{name: "pays while the clock is back", at: 200 * ms,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 5}},
			want:  allowed(status(0, time.Second))},
		{name: "refill still counts from 1.1s", at: 1150 * ms,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}},
			want:  denied(0, 50*ms, status(0, 950*ms))},
	}},

	{name: "micro-USD amounts stay exact", steps: []step{
		{name: "one micro-dollar", at: 0,
			items: []bucket.Item{{Key: "a", Limit: microUSD, Cost: 1}},
			want:  allowed(status(999_999_999_999, µs))},
		{name: "half the budget less one", at: 0,
			items: []bucket.Item{{Key: "a", Limit: microUSD, Cost: 499_999_999_999}},
			want:  allowed(status(500_000_000_000, 12*time.Hour))},
		{name: "refund 123456789", at: 0, request: "r1",
			deltas: []bucket.Delta{{Key: "a", Limit: microUSD, Units: -123_456_789}}},
		{name: "read back", at: 0,
			items: []bucket.Item{{Key: "a", Limit: microUSD, Cost: 0}},
			want:  allowed(status(500_123_456_789, 43_189_333_334*µs))},
		{name: "one µs refills 11.57 µUSD", at: µs,
			items: []bucket.Item{{Key: "a", Limit: microUSD, Cost: 0}},
			want:  allowed(status(500_123_456_800, 43_189_333_333*µs))},
		{name: "full after the reset", at: 43_189_333_334 * µs,
			items: []bucket.Item{{Key: "a", Limit: microUSD, Cost: 0}},
			want:  allowed(status(1_000_000_000_000, 0))},
	}},

	{name: "no items", steps: []step{
		{name: "an empty take is allowed", at: 0,
			items: []bucket.Item{},
			want:  allowed()},
	}},

	{name: "invalid input is an error and changes nothing", steps: []step{
		{name: "reserve 3", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}},
			want:  allowed(status(7, 300*ms))},
		{name: "a zero limit", at: 0, invalid: true,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}, {Key: "b", Limit: bucket.Limit{}, Cost: 1}}},
		{name: "a negative cost", at: 0, invalid: true,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: -1}}},
		{name: "a key twice", at: 0, invalid: true,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}, {Key: "a", Limit: tenPerSecond, Cost: 1}}},
		{name: "a reconcile with a zero limit", at: 0, request: "r1", invalid: true,
			deltas: []bucket.Delta{{Key: "a", Limit: tenPerSecond, Units: -3}, {Key: "b", Limit: bucket.Limit{}, Units: 1}}},
		{name: "read back 7", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(7, 300*ms))},
		{name: "a failed reconcile did not use up its request id", at: 0, request: "r1",
			deltas: []bucket.Delta{{Key: "a", Limit: tenPerSecond, Units: -3}}},
		{name: "read back 10", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(10, 0))},
	}},
}

// ten returns ten tenPerSecond items k0…k9, costing cost each but the last,
// which costs last.
func ten(prefix string, cost, last int64) []bucket.Item {
	items := make([]bucket.Item, 10)
	for i := range items {
		items[i] = bucket.Item{Key: fmt.Sprint(prefix, i), Limit: tenPerSecond, Cost: cost}
	}
	items[9].Cost = last
	return items
}

func repeat(s bucket.Status, n int) []bucket.Status {
	out := make([]bucket.Status, n)
	for i := range out {
		out[i] = s
	}
	return out
}
