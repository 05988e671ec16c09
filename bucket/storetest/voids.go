package storetest

import (
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// voidTimelines are the contract of Store.Void: a take that failed on the
// caller's side may have been applied by the store, and its Void gives back
// exactly what it took, once, whichever of the two reaches the store first.
// Every Void here comes within a second of its take, well inside any void
// window, except where the outcome is the same either way.
var voidTimelines = []timeline{
	{name: "a void after an applied take refunds it once", steps: []step{
		{name: "take r1 from two buckets", at: 0, request: "r1",
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}, {Key: "b", Limit: fourSlow, Cost: 2}},
			want:  allowed(status(7, 300*ms), status(2, 2*time.Second))},
		{name: "void r1", at: 0, request: "r1",
			voids: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}, {Key: "b", Limit: fourSlow, Cost: 2}}},
		{name: "read back: both refunded", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond}, {Key: "b", Limit: fourSlow}},
			want:  allowed(status(10, 0), status(4, 0))},
		{name: "take r2", at: 0, request: "r2",
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 4}, {Key: "b", Limit: fourSlow, Cost: 1}},
			want:  allowed(status(6, 400*ms), status(3, time.Second))},
		{name: "void r1 again: a no-op", at: 0, request: "r1",
			voids: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}, {Key: "b", Limit: fourSlow, Cost: 2}}},
		{name: "read back: r2 still taken, nothing refunded twice", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond}, {Key: "b", Limit: fourSlow}},
			want:  allowed(status(6, 400*ms), status(3, time.Second))},
	}},

	{name: "a void before its take: the take applies nothing", steps: []step{
		{name: "void late before it runs", at: 0, request: "late",
			voids: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}, {Key: "b", Limit: fourSlow, Cost: 2}}},
		{name: "read back: the tombstone refunded nothing", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond}, {Key: "b", Limit: fourSlow}},
			want:  allowed(status(10, 0), status(4, 0))},
		{name: "the late take arrives", at: 10 * ms, request: "late",
			items:  []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}, {Key: "b", Limit: fourSlow, Cost: 2}},
			voided: true},
		{name: "read back: nothing taken", at: 10 * ms,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond}, {Key: "b", Limit: fourSlow}},
			want:  allowed(status(10, 0), status(4, 0))},
		{name: "void late again: a no-op", at: 20 * ms, request: "late",
			voids: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}, {Key: "b", Limit: fourSlow, Cost: 2}}},
		{name: "the take once more: still voided", at: 20 * ms, request: "late",
			items:  []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}, {Key: "b", Limit: fourSlow, Cost: 2}},
			voided: true},
		{name: "another request takes as usual", at: 20 * ms, request: "other",
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}, {Key: "b", Limit: fourSlow, Cost: 2}},
			want:  allowed(status(7, 300*ms), status(2, 2*time.Second))},
	}},

	{name: "a void of a denied take refunds nothing", steps: []step{
		{name: "drain a", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 10}},
			want:  allowed(status(0, time.Second))},
		{name: "take d is denied", at: 0, request: "d",
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 5}},
			want:  denied(0, 500*ms, status(0, time.Second))},
		{name: "void d", at: 0, request: "d",
			voids: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 5}}},
		{name: "read back: still drained", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond}},
			want:  allowed(status(0, time.Second))},
	}},

	{name: "a take denied by a later bucket, then voided, refunds nothing twice", steps: []step{
		// In Redis Cluster with a slot per key, a is taken in its slot
		// before b denies, and given back at once (as the void of that
		// slot): the request's Void must not give it back again.
		{name: "half of a, all of b", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 5}, {Key: "b", Limit: fourSlow, Cost: 4}},
			want:  allowed(status(5, 500*ms), status(0, 4*time.Second))},
		{name: "take h: b denies", at: 0, request: "h",
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}, {Key: "b", Limit: fourSlow, Cost: 1}},
			want:  denied(1, time.Second, status(5, 500*ms), status(0, 4*time.Second))},
		{name: "void h", at: 0, request: "h",
			voids: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}, {Key: "b", Limit: fourSlow, Cost: 1}}},
		{name: "read back: a as before h", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond}, {Key: "b", Limit: fourSlow}},
			want:  allowed(status(5, 500*ms), status(0, 4*time.Second))},
	}},

	{name: "a void never lifts a bucket above capacity", steps: []step{
		{name: "take e", at: 0, request: "e",
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}},
			want:  allowed(status(7, 300*ms))},
		{name: "refilled to full by now", at: 500 * ms,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond}},
			want:  allowed(status(10, 0))},
		{name: "void e", at: 500 * ms, request: "e",
			voids: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 3}}},
		{name: "read back: full, no more", at: 500 * ms,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 10}},
			want:  allowed(status(0, time.Second))},
	}},

	{name: "a void refunds a quota in its take's window only", steps: []step{
		{name: "take q1: 4 of 10 today", at: 0, request: "q1",
			items: []bucket.Item{{Key: "q", Limit: tenToday, Cost: 4}},
			want:  allowed(status(6, 12*h))},
		{name: "take q2: 3 more", at: 0, request: "q2",
			items: []bucket.Item{{Key: "q", Limit: tenToday, Cost: 3}},
			want:  allowed(status(3, 12*h))},
		{name: "void q1", at: 0, request: "q1",
			voids: []bucket.Item{{Key: "q", Limit: tenToday, Cost: 4}}},
		{name: "read back: q2's 3 used", at: 0,
			items: []bucket.Item{{Key: "q", Limit: tenToday}},
			want:  allowed(status(7, 12*h))},
		{name: "tomorrow: take q3", at: 12 * h, request: "q3",
			items: []bucket.Item{{Key: "q", Limit: tenTomorrow, Cost: 5}},
			want:  allowed(status(5, 24*h))},
		// Whether the store still remembers q2 (Redis's marker lives in
		// real time) or not (the memory store's follows this clock), the
		// outcome is the same: yesterday's units never refund today's.
		{name: "void q2: its window has passed", at: 12 * h, request: "q2",
			voids: []bucket.Item{{Key: "q", Limit: tenToday, Cost: 3}}},
		{name: "read back: today's 5 used", at: 12 * h,
			items: []bucket.Item{{Key: "q", Limit: tenTomorrow}},
			want:  allowed(status(5, 24*h))},
	}},

	{name: "a void needs a request id and valid items", steps: []step{
		{name: "no request id", at: 0,
			voids:   []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: 1}},
			invalid: true},
		{name: "a negative cost", at: 0, request: "neg",
			voids:   []bucket.Item{{Key: "a", Limit: tenPerSecond, Cost: -1}},
			invalid: true},
		{name: "an invalid limit", at: 0, request: "bad",
			voids:   []bucket.Item{{Key: "a", Limit: bucket.Limit{Capacity: 1}, Cost: 1}},
			invalid: true},
		{name: "read back: nothing changed", at: 0,
			items: []bucket.Item{{Key: "a", Limit: tenPerSecond}},
			want:  allowed(status(10, 0))},
	}},
}
