package bucket

import (
	"math/bits"
	"time"
)

// maxExactUnits is the largest Capacity whose levels the scripts' doubles
// hold to the unit (2^53): up to it a level minus a whole cost is exact,
// so a take's reply plus its cost is the level before the take.
const maxExactUnits = 1 << 53

// statusesBefore turns the statuses an allowed take of a slot group wrote
// into buckets (the request's, by item; the group's items at idx) into
// what a take of cost zero would have read at the same instant, as if the
// group had not taken: what takeGroups reports for a group it refunds
// when another group denied the request, instead of reading the group
// again after the refund (one script call and round trip fewer). It
// returns false, and changes nothing, when an item's cannot be worked out
// from the reply alone; the caller then reads the group again. Per kind:
//
//   - a quota or a fixed window: Remaining plus the cost (Remaining is
//     Capacity minus the units counted, a whole number); Reset unchanged
//     (its window's end, whatever it holds);
//   - an in-flight limit: Remaining plus the cost (the slot it held);
//     Reset 0 when it held one (its take found a slot free: live below
//     Capacity), else unchanged;
//   - a token bucket: Remaining plus the cost (the level rounded down, less
//     a whole cost); Reset 0 when that reaches Capacity (full), else the
//     take's Reset less floor(cost × Per / Rate) µs, the refill of the
//     cost, at least 1 µs: exact when cost × Per / Rate is a whole number
//     of µs (wait rounds the time up to whole µs), otherwise at most 1 µs
//     later than the script would say, give or take the script's own
//     rounding: its level is a double, so where the exact wait is a whole
//     number of µs its figure can be 1 µs past this one, and a capacity's
//     or a long wait's ulps weigh Per/Rate µs a unit (FuzzStatusesBefore
//     holds it to that bound, resetSlack); a refunded group's Reset is a
//     header's figure, never a decision;
//   - a sliding window (a weighted count: its Remaining no sum of the
//     cost, its Reset depends on whether the current window held
//     anything): its status at the take's instant from its counts before
//     the take, which its reply carries (take.lua, statusesIn: prev and
//     cur, 2 numbers an item, in idx's order), by the script's arithmetic
//     (windowStatus, which core.lua mirrors), the instant being the
//     window's start plus two windows less the take's Reset (its current
//     window counts the cost); a cost of 0 changed nothing; without the
//     counts, not at all;
//   - nor a token bucket whose Reset is the scripts' cap (maxWait µs),
//     which no longer tells the level, nor a Capacity past maxExactUnits
//     (Validate refuses it).
//
// The statuses are those of the take's instant, not of the refund's a
// round trip later: a reading no older than the denying group's own.
func statusesBefore(items []Item, idx []int, buckets []Status, windows []time.Time, before []int64) bool {
	for _, i := range idx {
		l := &items[i].Limit
		switch {
		case l.Algorithm == SlidingWindow && (before == nil || i >= len(windows)) || l.Capacity > maxExactUnits:
			return false
		case !l.IsQuota() && !l.IsWindow() && !l.Concurrent && buckets[i].Reset >= maxWait*time.Microsecond:
			return false
		}
	}
	for j, i := range idx {
		it, st := &items[i], &buckets[i]
		if it.Limit.Algorithm == SlidingWindow {
			if it.Cost > 0 {
				*st = slidingBefore(it.Limit, st.Reset, windows[i], before[2*j], before[2*j+1])
			}
			continue
		}
		st.Remaining += it.Cost
		switch {
		case it.Limit.IsQuota() || it.Limit.IsWindow():
			continue
		case it.Limit.Concurrent:
			if it.Cost > 0 {
				st.Reset = 0
			}
			continue
		}
		if st.Remaining >= it.Limit.Capacity {
			st.Reset = 0
			continue
		}
		w := int64(st.Reset/time.Microsecond) - refillMicros(it.Cost, it.Limit)
		st.Reset = time.Duration(max(w, 1)) * time.Microsecond
	}
	return true
}

// slidingBefore is the status of a sliding window of l that held prev
// and cur units (slid to the window starting at start) at the instant of a
// take of a positive cost that left it with Reset after (its current
// window counting the cost: Reset is start + 2 Per − now, µs).
func slidingBefore(l Limit, after time.Duration, start time.Time, prev, cur int64) Status {
	capacity, per, _, _ := l.windowed()
	s := start.UnixMicro()
	now := s + 2*per - int64(after/time.Microsecond)
	return windowStatus(float64(prev), float64(cur), s, per, capacity, now, true)
}

// refillMicros is floor(cost × Per / Rate), Per in µs: the whole µs a
// token bucket of l takes to refill cost units; math.MaxInt64 when that
// passes it. cost >= 0 and l a valid token bucket (Rate and Per > 0).
func refillMicros(cost int64, l Limit) int64 {
	hi, lo := bits.Mul64(uint64(cost), uint64(l.Per/time.Microsecond))
	if hi >= uint64(l.Rate) {
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, uint64(l.Rate))
	if q > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(q)
}
