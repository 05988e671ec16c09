package bucket

import "time"

// QuotaState is one quota's stored state. The zero QuotaState is a new
// quota, with nothing used. A QuotaState is a plain value: copying it is
// safe, and the functions below never modify their argument.
type QuotaState struct {
	// Used is the units used in Window, in [0, 2^53]: above the limit's
	// capacity while reconciliation has charged more than was reserved.
	Used int64
	// Window is the start of the window Used counts in, at microsecond
	// resolution. The zero time means a new quota: Used is then ignored and
	// taken as 0.
	Window time.Time
}

// quotaMargin is how long, in µs, a quota's state outlives its window: late
// reconciliations of the window still find it, and read-outs of the last
// period still see it.
const quotaMargin = int64(time.Hour / time.Microsecond)

// CheckQuota is phase one of a take from a quota: it brings s into l's
// window (a later window starts from nothing used) and reports whether cost
// units fit in it, without using them. The State returned is the rolled one,
// and the Verdict's Status describes it. A denial waits until the window
// ends; a cost above Capacity is TooLarge. A cost of zero is always OK, even
// from a quota used up. l must be a valid quota and cost >= 0.
func CheckQuota(s QuotaState, l Limit, now time.Time, cost int64) (QuotaState, Verdict) {
	capacity, windowStart, windowEnd := l.window()
	used, window := s.load(windowStart)
	used, window, ok, tooLarge, short := checkQuotaAt(used, window, windowStart, windowEnd, capacity, now.UnixMicro(), float64(cost))
	v := Verdict{OK: ok, TooLarge: tooLarge, Wait: micros(short)}
	v.Status = quotaStatus(used, capacity, windowEnd, now.UnixMicro())
	return quotaState(used, window), v
}

// TakeQuota rolls s into l's window and, when the Verdict is OK, uses cost
// units of it, returning the new QuotaState; the Verdict's Status describes
// the quota after the take. When the Verdict is not OK, TakeQuota returns s
// itself (a denial changes nothing, as a Store writes nothing). l must be a
// valid quota and cost >= 0.
func TakeQuota(s QuotaState, l Limit, now time.Time, cost int64) (QuotaState, Verdict) {
	rolled, v := CheckQuota(s, l, now, cost)
	if !v.OK {
		return s, v
	}
	capacity, _, windowEnd := l.window()
	used := charge(float64(rolled.Used), float64(cost))
	v.Status = quotaStatus(used, capacity, windowEnd, now.UnixMicro())
	return quotaState(used, rolled.Window.UnixMicro()), v
}

// ApplyQuota is a reconciliation delta on one quota: units (negative
// refunds) are added to the units used in l's window, which never go below
// zero. When s already counts a later window than l's (the period moved on
// since the take), the delta applies to nothing and s is returned as is. l
// must be a valid quota.
func ApplyQuota(s QuotaState, l Limit, now time.Time, units int64) (QuotaState, Status) {
	capacity, windowStart, windowEnd := l.window()
	used, window := s.load(windowStart)
	used, window, _ = applyQuota(used, window, windowStart, windowEnd, float64(units))
	return quotaState(used, window), quotaStatus(used, capacity, windowEnd, now.UnixMicro())
}

// Status reports s under l at now as the caller's headers need it:
// Remaining is Capacity minus the units used in l's window (all of it when
// s counts an earlier window), Reset the time until the window ends.
func (s QuotaState) Status(l Limit, now time.Time) Status {
	capacity, windowStart, windowEnd := l.window()
	used, window := s.load(windowStart)
	used, _ = roll(used, window, windowStart, windowEnd)
	return quotaStatus(used, capacity, windowEnd, now.UnixMicro())
}

// load returns the numbers the core works on; a new quota has nothing used
// in the item's window.
func (s QuotaState) load(windowStart int64) (used float64, window int64) {
	if s.Window.IsZero() {
		return 0, windowStart
	}
	return float64(s.Used), s.Window.UnixMicro()
}

func quotaState(used float64, window int64) QuotaState {
	return QuotaState{Used: int64(used), Window: time.UnixMicro(window).UTC()}
}

// The quota core, mirrored line by line under the same names by the Redis
// scripts in lua/, as the token-bucket core is (see tokenbucket.go):
//
//	used         units used in window, float64, a whole number in [0, 2^53]
//	window       start of the window used counts in, µs since the Unix epoch
//	windowStart  start of the item's window, µs; windowEnd its end, µs
//	now          the store's clock, µs since the Unix epoch
//	capacity     units per window, cost units (float64)
//
// Every number is a whole number below 2^53 (used is clamped there), so
// float64 and Lua arithmetic are exact and agree; capacity - cost is taken
// rather than used + cost, which could round above 2^53.

// roll brings a quota into the item's window [windowStart, windowEnd): a
// stored window before windowStart is a past period, so used starts again
// from 0. A stored window at or after windowEnd (a caller whose clock lags
// the one that began the next period) is kept with its used: a window never
// moves back, as a clock that steps back never refills a token bucket, so two
// callers on either side of a boundary cannot reset each other's period. A
// stored window that starts inside the item's (the quota's period was made
// longer, say from a day to a month, on a reload) becomes the item's window
// and keeps its used: usage so far is carried into the longer period.
func roll(used float64, window, windowStart, windowEnd int64) (float64, int64) {
	if window < windowStart {
		used = 0
		window = windowStart
	} else if window > windowStart && window < windowEnd {
		window = windowStart
	}
	return used, window
}

// checkQuota is phase one for one rolled quota: can cost fit in the window
// now, and can it ever (cost above capacity fits no window). A cost of zero
// always passes.
func checkQuota(used, capacity, cost float64) (ok, tooLarge bool) {
	if cost > capacity {
		return false, true
	}
	return cost == 0 || used <= capacity-cost, false
}

// charge adds units to used (negative refunds): never below 0, saturating
// at 2^53.
func charge(used, units float64) float64 {
	used = used + units
	if used < 0 {
		used = 0
	} else if used > maxUnits {
		used = maxUnits
	}
	return used
}

// untilEnd returns the µs from now until windowEnd; 0 once it has passed.
func untilEnd(windowEnd, now int64) float64 {
	if now >= windowEnd {
		return 0
	}
	return float64(windowEnd - now)
}

// applyQuota is a reconciliation delta: units added to the used of the
// delta's window. A stored window at or after windowEnd means the period
// has moved on since the take: the delta applies to nothing (applied is
// false) and the state stays as it was.
func applyQuota(used float64, window, windowStart, windowEnd int64, units float64) (float64, int64, bool) {
	if window >= windowEnd {
		return used, window, false
	}
	used, window = roll(used, window, windowStart, windowEnd)
	return charge(used, units), window, true
}

// quotaExpiry returns the µs from now until a quota's state of the window
// ending at windowEnd may be forgotten: quotaMargin past the window's end.
func quotaExpiry(windowEnd, now int64) float64 {
	return untilEnd(windowEnd, now) + float64(quotaMargin)
}

// checkQuotaAt is phase one of a take from one quota, run by CheckQuota
// and by the Memory store's Take alike: roll into the item's window, then
// check cost. short is the µs until the window ends when the cost does not
// fit now but could in a later window; 0 otherwise.
func checkQuotaAt(used float64, window, windowStart, windowEnd int64, capacity float64, now int64, cost float64) (float64, int64, bool, bool, float64) {
	used, window = roll(used, window, windowStart, windowEnd)
	ok, tooLarge := checkQuota(used, capacity, cost)
	var short float64
	if !ok && !tooLarge {
		short = untilEnd(windowEnd, now)
	}
	return used, window, ok, tooLarge, short
}

func quotaStatus(used, capacity float64, windowEnd, now int64) Status {
	return Status{Remaining: floorUnits(capacity - used), Reset: micros(untilEnd(windowEnd, now))}
}
