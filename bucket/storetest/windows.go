package storetest

import (
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// The window counters the window timelines use: 10 units a minute. Start
// (noon) is a minute boundary, so the first window starts at Start.
var (
	fixedTen   = bucket.Window(bucket.FixedWindow, 10, time.Minute)
	slidingTen = bucket.Window(bucket.SlidingWindow, 10, time.Minute)
)

// takenIn is l as a Delta of a take counted in the window starting at
// offset from Start names it.
func takenIn(l bucket.Limit, offset time.Duration) bucket.Limit {
	l.WindowStart = Start.Add(offset)
	return l
}

const sec = time.Second

var windowTimelines = []timeline{
	{name: "a fixed window admits its capacity per window, twice across a boundary", steps: []step{
		{name: "10 late in the first window", at: 50 * sec,
			items: []bucket.Item{{Key: "f", Limit: fixedTen, Cost: 10}},
			want:  allowed(status(0, 10*sec)), windows: []time.Duration{0}},
		{name: "one more waits for the boundary, exactly", at: 55 * sec,
			items: []bucket.Item{{Key: "f", Limit: fixedTen, Cost: 1}},
			want:  denied(0, 5*sec, status(0, 5*sec)), windows: []time.Duration{0}},
		{name: "1µs before the boundary, still 1µs", at: time.Minute - µs,
			items: []bucket.Item{{Key: "f", Limit: fixedTen, Cost: 1}},
			want:  denied(0, µs, status(0, µs))},
		{name: "10 more at the boundary", at: time.Minute,
			items: []bucket.Item{{Key: "f", Limit: fixedTen, Cost: 10}},
			want:  allowed(status(0, time.Minute)), windows: []time.Duration{time.Minute}},
		{name: "11 is too large", at: time.Minute,
			items: []bucket.Item{{Key: "f", Limit: fixedTen, Cost: 11}},
			want:  tooLarge(0, status(0, time.Minute))},
	}},

	{name: "a sliding window weighs the previous window", steps: []step{
		{name: "10 late in the first window", at: 50 * sec,
			items: []bucket.Item{{Key: "s", Limit: slidingTen, Cost: 10}},
			want:  allowed(status(0, 70*sec)), windows: []time.Duration{0}},
		// At the boundary the previous 10 weigh in full: one unit fits once
		// 10 × (60s − e)/60s <= 9, e >= 6s.
		{name: "at the boundary one unit waits 6s", at: time.Minute,
			items: []bucket.Item{{Key: "s", Limit: slidingTen, Cost: 1}},
			want:  denied(0, 6*sec, status(0, time.Minute)), windows: []time.Duration{time.Minute}},
		{name: "6s later it fits", at: 66 * sec,
			items: []bucket.Item{{Key: "s", Limit: slidingTen, Cost: 1}},
			want:  allowed(status(0, 114*sec)), windows: []time.Duration{time.Minute}},
		{name: "half way, 4 more fit (10 × 1/2 + 1 = 6 counted)", at: 90 * sec,
			items: []bucket.Item{{Key: "s", Limit: slidingTen, Cost: 4}},
			want:  allowed(status(0, 90*sec))},
		{name: "with a token bucket: the window denies, the bucket is not spent", at: 90 * sec,
			items: []bucket.Item{{Key: "b", Limit: tenPerSecond, Cost: 3}, {Key: "s", Limit: slidingTen, Cost: 1}},
			want:  denied(1, 6*sec, status(10, 0), status(0, 90*sec))}, // 10 × 24/60 + 5 + 1 <= 10 at 96s
		{name: "the bucket is full still", at: 90 * sec,
			items: []bucket.Item{{Key: "b", Limit: tenPerSecond, Cost: 0}},
			want:  allowed(status(10, 0))},
	}},

	{name: "a window's deltas apply to the window of the take", steps: []step{
		{name: "8 in the first window", at: 50 * sec, request: "t1",
			items: []bucket.Item{{Key: "s", Limit: slidingTen, Cost: 8}, {Key: "f", Limit: fixedTen, Cost: 8}},
			want:  allowed(status(2, 70*sec), status(2, 10*sec)), windows: []time.Duration{0, 0}},
		{name: "refund 6 of them in the next window", at: 61 * sec, request: "r1",
			deltas: []bucket.Delta{{Key: "s", Limit: takenIn(slidingTen, 0), Units: -6}, {Key: "f", Limit: takenIn(fixedTen, 0), Units: -6}}},
		// Sliding: prev 8 − 6 = 2, weighing 2 × 59/60: 8 remain. Fixed: the
		// first window is past, the refund applies to nothing.
		{name: "the sliding window's prev fell; the fixed window starts empty", at: 61 * sec,
			items: []bucket.Item{{Key: "s", Limit: slidingTen}, {Key: "f", Limit: fixedTen}},
			want:  allowed(status(8, 59*sec), status(10, 59*sec))},
		{name: "a charge two windows back applies to nothing", at: 61 * sec, request: "r2",
			deltas: []bucket.Delta{{Key: "s", Limit: takenIn(slidingTen, -time.Minute), Units: 5}}},
		{name: "unchanged", at: 61 * sec,
			items: []bucket.Item{{Key: "s", Limit: slidingTen}},
			want:  allowed(status(8, 59*sec))},
		{name: "a charge with no take window goes to the current one", at: 61 * sec, request: "r3",
			deltas: []bucket.Delta{{Key: "s", Limit: slidingTen, Units: 3}}},
		{name: "2 × 59/60 + 3 counted", at: 61 * sec,
			items: []bucket.Item{{Key: "s", Limit: slidingTen}},
			want:  allowed(status(5, 119*sec))},
		{name: "a charge into the current window may go beyond capacity", at: 62 * sec, request: "r4",
			deltas: []bucket.Delta{{Key: "s", Limit: takenIn(slidingTen, time.Minute), Units: 10}}},
		// 2 × 58/60 + 13 = 14.93: 5 in debt; 1 unit fits once the window
		// ends (prev 13 weighs 13 × (60 − e)/60 <= 9, e >= 18.46s).
		{name: "in debt: the wait reaches into the next window", at: 62 * sec,
			items: []bucket.Item{{Key: "s", Limit: slidingTen, Cost: 1}},
			want:  denied(0, 58*sec+18*sec+461539*µs, status(-5, 118*sec))},
	}},

	{name: "a window take is voided in its window", steps: []step{
		{name: "take 7", at: 10 * sec, request: "v",
			items: []bucket.Item{{Key: "s", Limit: slidingTen, Cost: 7}},
			want:  allowed(status(3, 110*sec))},
		{name: "void it", at: 11 * sec, request: "v",
			voids: []bucket.Item{{Key: "s", Limit: slidingTen, Cost: 7}}},
		{name: "nothing counted", at: 11 * sec,
			items: []bucket.Item{{Key: "s", Limit: slidingTen}},
			want:  allowed(status(10, 0))},
	}},

	{name: "window limits are validated", steps: []step{
		{name: "a window of no length", at: 0, invalid: true,
			items: []bucket.Item{{Key: "s", Limit: bucket.Window(bucket.SlidingWindow, 10, 0), Cost: 1}}},
		{name: "a take window not on a boundary", at: 0, invalid: true, request: "bad",
			deltas: []bucket.Delta{{Key: "s", Limit: takenIn(slidingTen, sec), Units: 1}}},
		{name: "a quota bound on a window", at: 0, invalid: true,
			items: []bucket.Item{{Key: "s", Limit: bucket.Limit{Algorithm: bucket.FixedWindow, Capacity: 1, Per: time.Minute, WindowEnd: day2}, Cost: 1}}},
	}},
}
