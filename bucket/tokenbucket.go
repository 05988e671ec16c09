package bucket

import (
	"math"
	"time"
)

// State is one token bucket's stored state. The zero State is a new bucket,
// which is full. A State is a plain value: copying it is safe, and the
// functions below never modify their argument.
type State struct {
	// Level is the bucket's content in units at Updated. It is negative while
	// the bucket is in debt after reconciliation.
	Level float64
	// Updated is the instant of the last refill, at microsecond resolution.
	// The zero time means a new bucket: Level is then ignored and taken as
	// the limit's capacity.
	Updated time.Time
}

// Verdict is the check of one bucket (a token bucket or a quota) for one
// cost at one instant.
type Verdict struct {
	// OK is true when the bucket can pay the cost now.
	OK bool
	// TooLarge is true when the cost exceeds the capacity: it can never be
	// paid, whatever the wait.
	TooLarge bool
	// Wait is the least whole number of microseconds after which the bucket
	// could pay the cost; zero when OK or TooLarge. It is capped at 2^53µs
	// (about 285 years). For a quota it is the time until its window ends
	// (zero once it has).
	Wait time.Duration
	// Status is the status of the State returned with the Verdict.
	Status Status
}

// Refill returns s brought forward to now under l: the level grows by the
// elapsed time × Rate/Per and is clamped to Capacity (so a lowered capacity
// takes effect at once, even with no time elapsed). A now before s.Updated (a
// clock stepping back) adds nothing and leaves Updated where it was. l must be
// valid (see Limit.Validate); the result is undefined otherwise.
func Refill(s State, l Limit, now time.Time) State {
	capacity, rate, per := l.floats()
	level, updated := s.load(capacity, now)
	return state(refill(level, updated, capacity, rate, per, now.UnixMicro()))
}

// Check is phase one of a take: it refills s to now and reports whether cost
// units could be paid, without paying them. The State returned is the
// refilled one, and the Verdict's Status describes it. A cost of zero is
// always OK, even from a bucket in debt. l must be valid and cost >= 0.
func Check(s State, l Limit, now time.Time, cost int64) (State, Verdict) {
	capacity, rate, per := l.floats()
	level, updated := s.load(capacity, now)
	level, updated, ok, tooLarge, short := checkAt(level, updated, capacity, rate, per, now.UnixMicro(), float64(cost))
	v := Verdict{OK: ok, TooLarge: tooLarge, Wait: micros(short)}
	v.Status = status(level, capacity, rate, per)
	return state(level, updated), v
}

// Take refills s to now and, when the Verdict is OK, pays cost units from it,
// returning the new State; the Verdict's Status describes the bucket after
// the take. When the Verdict is not OK, Take returns s itself (a denial
// changes nothing, as a Store writes nothing) and the Status describes the
// bucket after the refill. l must be valid and cost >= 0.
func Take(s State, l Limit, now time.Time, cost int64) (State, Verdict) {
	refilled, v := Check(s, l, now, cost)
	if !v.OK {
		return s, v
	}
	capacity, rate, per := l.floats()
	level, reset := pay(refilled.Level, capacity, rate, per, float64(cost))
	refilled.Level = level
	v.Status = Status{Remaining: floorUnits(level), Reset: micros(reset)}
	return refilled, v
}

// Apply is a reconciliation delta on one bucket: it refills s to now, then
// removes units from the level (a negative units refunds). A refund never
// lifts the level above Capacity; a charge may take it below zero (debt),
// which the bucket pays back by refilling before it admits again. l must be
// valid.
func Apply(s State, l Limit, now time.Time, units int64) (State, Status) {
	capacity, rate, per := l.floats()
	level, updated := s.load(capacity, now)
	level, updated = apply(level, updated, capacity, rate, per, now.UnixMicro(), float64(units))
	return state(level, updated), status(level, capacity, rate, per)
}

// Status reports s under l as the caller's headers need it: Remaining is the
// level rounded down, Reset the time until the level reaches Capacity. It
// reads s as it is: refill it to the instant of interest first (Check, Take
// and Apply return refilled states). The zero State is full.
func (s State) Status(l Limit) Status {
	capacity, rate, per := l.floats()
	if s.Updated.IsZero() {
		return status(capacity, capacity, rate, per)
	}
	return status(s.Level, capacity, rate, per)
}

// load returns the numbers the core works on; a new bucket is full at now.
func (s State) load(capacity float64, now time.Time) (level float64, updated int64) {
	if s.Updated.IsZero() {
		return capacity, now.UnixMicro()
	}
	return s.Level, s.Updated.UnixMicro()
}

func state(level float64, updated int64) State {
	return State{Level: level, Updated: time.UnixMicro(updated).UTC()}
}

// maxWait caps every wait, in microseconds: 2^53µs (about 285 years) is exact
// as a float64 and fits a time.Duration.
const maxWait = 1 << 53

// The core. These functions take and return the same plain numbers, under the
// same names, as the Redis scripts in lua/, and each line has a Lua twin:
//
//	level     units held, float64, negative in debt
//	updated   instant of the last refill, µs since the Unix epoch, integer
//	now       the store's clock, µs since the Unix epoch, integer
//	capacity  units, rate units per per, per µs, cost units (all float64)
//
// Lua 5.1 numbers are IEEE doubles, so the same operations in the same order
// give the same bits. The float64(...) conversions around products forbid the
// Go compiler from fusing a multiply and an add (the spec allows FMA
// otherwise), which Lua never does. (now - updated) is exact below 2^53µs; the
// product (now - updated) × rate is taken before the division so that whole
// refills stay exact integers. A Redis store must keep level with 17
// significant digits (%.17g) so that it round-trips exactly.

// refill brings level forward to now. A clock that steps back (now <
// updated) adds nothing and leaves updated alone. The clamp runs even then,
// so a lowered capacity applies at once.
func refill(level float64, updated int64, capacity, rate, per float64, now int64) (float64, int64) {
	if now > updated {
		level = level + float64(float64(now-updated)*rate/per)
		updated = now
	}
	if level > capacity {
		level = capacity
	}
	return level, updated
}

// check is phase one for one refilled bucket: can it pay cost now, and can it
// ever (cost above capacity never passes). A cost of zero always passes.
func check(level, capacity, cost float64) (ok, tooLarge bool) {
	if cost > capacity {
		return false, true
	}
	return cost == 0 || level >= cost, false
}

// wait returns the least whole number of µs after which refill would lift
// level to target (<= capacity), capped at maxWait. It starts from the
// rounded-down quotient and steps up while the refill, computed exactly as
// refill computes it, falls short: the answer is exact for refill's own
// arithmetic, so waiting it always suffices, and float noise in the quotient
// (3500000.0000000005 for 3.5s) does not cost an extra microsecond. Two steps
// cover the rounding of every limit that fills in under a century.
func wait(level, target, rate, per float64) float64 {
	if level >= target {
		return 0
	}
	w := math.Floor((target - level) * per / rate)
	if w >= maxWait {
		return maxWait
	}
	for i := 0; i < 2 && level+float64(w*rate/per) < target; i++ {
		w = w + 1
	}
	return w
}

// apply is a reconciliation delta: refill, remove units (negative refunds),
// never above capacity.
func apply(level float64, updated int64, capacity, rate, per float64, now int64, units float64) (float64, int64) {
	level, updated = refill(level, updated, capacity, rate, per, now)
	level = level - units
	if level > capacity {
		level = capacity
	}
	return level, updated
}

// The steps of a take. Check and Take above and the Memory store's Take run
// these same functions (and Apply and the Memory store's Reconcile run apply)
// on the core's numbers, the Memory store without the time.Time round trip,
// so what the golden tests check through the exported functions is what the
// Memory store runs. take.lua runs the same core calls in the same order
// inline in its phase 1 and phase 2 loops (checkQuotaAt in quota.go likewise).

// checkAt is phase one of a take from one token bucket: refill to now, then
// check cost. short is the wait in µs when the bucket cannot pay now but
// could later; 0 otherwise.
func checkAt(level float64, updated int64, capacity, rate, per float64, now int64, cost float64) (float64, int64, bool, bool, float64) {
	level, updated = refill(level, updated, capacity, rate, per, now)
	ok, tooLarge := check(level, capacity, cost)
	var short float64
	if !ok && !tooLarge {
		short = wait(level, cost, rate, per)
	}
	return level, updated, ok, tooLarge, short
}

// pay is phase two of a take from one refilled token bucket that can pay:
// the level after paying cost, and the µs until it is full again.
func pay(level, capacity, rate, per, cost float64) (float64, float64) {
	level = level - cost
	return level, wait(level, capacity, rate, per)
}

func status(level, capacity, rate, per float64) Status {
	return Status{Remaining: floorUnits(level), Reset: micros(wait(level, capacity, rate, per))}
}

// micros turns a whole number of µs (<= maxWait) into a Duration.
func micros(us float64) time.Duration {
	return time.Duration(us) * time.Microsecond
}

// floorUnits rounds level down to whole units, saturating at the int64 range
// (a bucket driven deep into debt by huge deltas).
func floorUnits(level float64) int64 {
	f := math.Floor(level)
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}
