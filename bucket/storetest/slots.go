package storetest

import (
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// twoSlots is an in-flight limit of two slots, each held for at most a
// minute.
var twoSlots = bucket.Slots(2, time.Minute)

// slotTimelines are the contract of in-flight limits (Limit.Concurrent):
// a take of cost 1 holds a slot under its request id, in the same
// two-phase take as the other buckets; a negative Reconcile delta or a Void
// under that id releases it; a holder that never releases is forgotten once
// its lease has passed.
var slotTimelines = []timeline{
	{name: "in-flight: two slots, a third waits for a release", steps: []step{
		{name: "r1 holds a slot", at: 0, request: "r1",
			items: []bucket.Item{{Key: "c", Limit: twoSlots, Cost: 1}},
			want:  allowed(status(1, 0))},
		{name: "r2 holds the other", at: ms, request: "r2",
			items: []bucket.Item{{Key: "c", Limit: twoSlots, Cost: 1}},
			want:  allowed(status(0, time.Second))},
		{name: "r3 is denied, retry after a second", at: 2 * ms, request: "r3",
			items: []bucket.Item{{Key: "c", Limit: twoSlots, Cost: 1}},
			want:  denied(0, time.Second, status(0, time.Second))},
		{name: "a read at cost 0 passes", at: 2 * ms,
			items: []bucket.Item{{Key: "c", Limit: twoSlots}},
			want:  allowed(status(0, time.Second))},
		{name: "r1 ends: its release", at: 3 * ms, request: "r1",
			deltas: []bucket.Delta{{Key: "c", Limit: twoSlots, Units: -1}}},
		{name: "r1's release again: a no-op (dedup)", at: 3 * ms, request: "r1",
			deltas: []bucket.Delta{{Key: "c", Limit: twoSlots, Units: -1}}},
		{name: "r3 now holds a slot", at: 4 * ms, request: "r3",
			items: []bucket.Item{{Key: "c", Limit: twoSlots, Cost: 1}},
			want:  allowed(status(0, time.Second))},
		{name: "r2 is voided: its slot frees", at: 5 * ms, request: "r2",
			voids: []bucket.Item{{Key: "c", Limit: twoSlots, Cost: 1}}},
		{name: "read back: one held", at: 5 * ms,
			items: []bucket.Item{{Key: "c", Limit: twoSlots}},
			want:  allowed(status(1, 0))},
	}},

	{name: "in-flight: a denial by another bucket holds no slot", steps: []step{
		{name: "drain a", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 10}},
			want:  allowed(status(0, time.Second))},
		{name: "r1 denied by a: holds nothing", at: 0, request: "r1",
			items: []bucket.Item{{Key: "c", Limit: twoSlots, Cost: 1}, {Key: "a", Limit: tenPerSecond, Cost: 1}},
			want:  denied(1, 100*ms, status(2, 0), status(0, time.Second))},
		{name: "read back: both slots free", at: 0,
			items: []bucket.Item{{Key: "c", Limit: twoSlots}},
			want:  allowed(status(2, 0))},
		{name: "a slot full denies the other bucket's take too", at: 0, request: "r2",
			items: []bucket.Item{{Key: "c", Limit: bucket.Slots(1, time.Minute), Cost: 1}},
			want:  allowed(status(0, time.Second))},
		{name: "r3 denied by c: takes nothing from b", at: 0, request: "r3",
			items: []bucket.Item{{Key: "c", Limit: bucket.Slots(1, time.Minute), Cost: 1}, {Key: "b", Limit: fourSlow, Cost: 1}},
			want:  denied(0, time.Second, status(0, time.Second), status(4, 0))},
	}},

	{name: "in-flight: the lease reclaims a dead holder's slot", steps: []step{
		{name: "dead holds a slot and never releases", at: 0, request: "dead",
			items: []bucket.Item{{Key: "c", Limit: twoSlots, Cost: 1}},
			want:  allowed(status(1, 0))},
		{name: "live holds the other", at: 30 * time.Second, request: "live",
			items: []bucket.Item{{Key: "c", Limit: twoSlots, Cost: 1}},
			want:  allowed(status(0, time.Second))},
		{name: "1µs before dead's lease ends: full", at: time.Minute - time.Microsecond, request: "x",
			items: []bucket.Item{{Key: "c", Limit: twoSlots, Cost: 1}},
			want:  denied(0, time.Second, status(0, time.Second))},
		{name: "dead's lease has passed: x takes its slot", at: time.Minute, request: "x",
			items: []bucket.Item{{Key: "c", Limit: twoSlots, Cost: 1}},
			want:  allowed(status(0, time.Second))},
		{name: "dead's late release frees nothing of the others'", at: time.Minute + 2*time.Microsecond, request: "dead",
			deltas: []bucket.Delta{{Key: "c", Limit: twoSlots, Units: -1}}},
		{name: "read back: live and x hold", at: time.Minute + 2*time.Microsecond,
			items: []bucket.Item{{Key: "c", Limit: twoSlots}},
			want:  allowed(status(0, time.Second))},
		{name: "every lease passed: all free", at: 3 * time.Minute,
			items: []bucket.Item{{Key: "c", Limit: twoSlots}},
			want:  allowed(status(2, 0))},
	}},

	{name: "in-flight: invalid takes", steps: []step{
		{name: "a slot without a request id", at: 0,
			items: []bucket.Item{{Key: "c", Limit: twoSlots, Cost: 1}}, invalid: true},
		{name: "a cost of two slots", at: 0, request: "r",
			items: []bucket.Item{{Key: "c", Limit: twoSlots, Cost: 2}}, invalid: true},
		{name: "a lease under a second", at: 0, request: "r",
			items: []bucket.Item{{Key: "c", Limit: bucket.Slots(2, time.Millisecond), Cost: 1}}, invalid: true},
		{name: "nothing was held", at: 0,
			items: []bucket.Item{{Key: "c", Limit: twoSlots}},
			want:  allowed(status(2, 0))},
	}},
}
