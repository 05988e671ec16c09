package bucket

import (
	"fmt"
	"math"
	"time"

	"github.com/llmguard/llmguard/spec"
)

// Algorithm is how a Limit that is not a calendar quota counts its units
// (spec.Algorithm, whose table names them). The zero value is TokenBucket.
type Algorithm = spec.Algorithm

const (
	// TokenBucket: Capacity units at most, refilled at Rate units per Per
	// (tokenbucket.go).
	TokenBucket = spec.TokenBucket
	// SlidingWindow: the sliding-window counter. Time is cut into windows
	// of Per aligned on the Unix epoch (on the store's clock); a take at
	// elapsed e into the current window counts
	// prev × (Per − e)/Per + cur, where prev and cur are the units taken
	// in the previous and the current window, and passes when that count
	// plus its cost is at most Capacity. It admits at most Capacity units
	// in any aligned window, and at most Capacity + prev × e/Per (under
	// 2 × Capacity) in any span of length Per ending at e into a window
	// (README, "Window algorithms", derives it).
	SlidingWindow = spec.SlidingWindow
	// FixedWindow: at most Capacity units in each window of Per aligned on
	// the Unix epoch (on the store's clock); a new window starts from
	// nothing. Up to 2 × Capacity can pass in a span of Per that straddles
	// a boundary.
	FixedWindow = spec.FixedWindow
)

// Window returns the Limit of a window counter (SlidingWindow or
// FixedWindow) of capacity units per window of per. It does not validate
// them (see Limit.Validate).
func Window(a Algorithm, capacity int64, per time.Duration) Limit {
	return Limit{Algorithm: a, Capacity: capacity, Per: per}
}

// IsWindow reports whether l is a window counter: its Algorithm is
// SlidingWindow or FixedWindow.
func (l Limit) IsWindow() bool {
	return l.Algorithm == SlidingWindow || l.Algorithm == FixedWindow
}

// maxWindowPer is the longest window, in µs (about 35 years): every wait
// (at most three windows) then stays below maxWait.
const maxWindowPer = 1 << 50

// validateWindowLimit checks a window counter: Per in [1µs, 2^50µs], no
// quota bound, and a take window (WindowStart, when set) that is a window
// of l: a whole number of Per since the Unix epoch, before 2^53µs.
func (l Limit) validateWindowLimit() error {
	switch {
	case l.Per < time.Microsecond || l.Per/time.Microsecond > maxWindowPer:
		return fmt.Errorf("%s per %v is not in [1µs, 2^50µs]: %w", l.Algorithm, l.Per, ErrInvalid)
	case !l.WindowEnd.IsZero():
		return fmt.Errorf("%s has a quota window end %v: %w", l.Algorithm, l.WindowEnd, ErrInvalid)
	case l.WindowStart.IsZero():
		return nil
	}
	start, per := l.WindowStart.UnixMicro(), int64(l.Per/time.Microsecond)
	if start < 0 || start >= maxUnits || start%per != 0 {
		return fmt.Errorf("%s take window %v is not a window of %v since the Unix epoch: %w", l.Algorithm, l.WindowStart, l.Per, ErrInvalid)
	}
	return nil
}

// windowed returns a window counter's l in the numbers the arithmetic
// works on: capacity in units, per in µs, taken the start of the window a
// delta's take counted in (µs; -1 when unknown: the store's current
// window), and sliding.
func (l *Limit) windowed() (capacity float64, per, taken int64, sliding bool) {
	taken = -1
	if !l.WindowStart.IsZero() {
		taken = l.WindowStart.UnixMicro()
	}
	return float64(l.Capacity), int64(l.Per / time.Microsecond), taken, l.Algorithm == SlidingWindow
}

// WindowState is one window counter's stored state. The zero WindowState
// is a new counter, with nothing taken. A WindowState is a plain value:
// copying it is safe, and the functions below never modify their argument.
type WindowState struct {
	// Prev is the units taken in the window before Start (a sliding
	// window; always 0 for a fixed window), Cur those taken in the window
	// that starts at Start: whole numbers in [0, 2^53], above Capacity
	// while reconciliation has charged more than was reserved.
	Prev, Cur int64
	// Start is the first instant of the window Cur counts, a whole number
	// of Per since the Unix epoch. The zero time means a new counter.
	Start time.Time
}

// CheckWindow is phase one of a take from a window counter: it slides s
// to now's window and reports whether cost units fit, without taking
// them. The State returned is the slid one, and the Verdict's Status
// describes it. A cost of zero is always OK; a cost above Capacity is
// TooLarge. l must be a valid window counter and cost >= 0.
func CheckWindow(s WindowState, l Limit, now time.Time, cost int64) (WindowState, Verdict) {
	capacity, per, _, sliding := l.windowed()
	prev, cur, start := s.load()
	prev, cur, start, ok, tooLarge, short := checkWindowAt(prev, cur, start, per, capacity, now.UnixMicro(), float64(cost), sliding)
	v := Verdict{OK: ok, TooLarge: tooLarge, Wait: micros(short)}
	v.Status = windowStatus(prev, cur, start, per, capacity, now.UnixMicro(), sliding)
	return windowState(prev, cur, start), v
}

// TakeWindow slides s to now's window and, when the Verdict is OK, takes
// cost units in it, returning the new WindowState; the Verdict's Status
// describes the counter after the take. When the Verdict is not OK,
// TakeWindow returns s itself (a denial changes nothing). l must be a
// valid window counter and cost >= 0.
func TakeWindow(s WindowState, l Limit, now time.Time, cost int64) (WindowState, Verdict) {
	slid, v := CheckWindow(s, l, now, cost)
	if !v.OK {
		return s, v
	}
	capacity, per, _, sliding := l.windowed()
	prev, cur, start := slid.load()
	cur = charge(cur, float64(cost))
	v.Status = windowStatus(prev, cur, start, per, capacity, now.UnixMicro(), sliding)
	return windowState(prev, cur, start), v
}

// ApplyWindow is a reconciliation delta on a window counter: it slides s
// to now's window, then adds units (negative refunds, never below 0) to
// the window the delta's take counted in, l.WindowStart (zero: the
// current window): Cur when that is the current window, Prev when it is
// the previous one of a sliding window; any other window is past (or, the
// clock having stepped back, not yet begun) and the delta applies to
// nothing (applied is false, s is returned as it was). A counter left
// with nothing is returned as the zero WindowState (stores delete it). l
// must be valid.
func ApplyWindow(s WindowState, l Limit, now time.Time, units int64) (WindowState, Status, bool) {
	capacity, per, taken, sliding := l.windowed()
	prev, cur, start := s.load()
	prev, cur, start, applied := applyWindow(prev, cur, start, per, now.UnixMicro(), taken, float64(units), sliding)
	if !applied {
		return s, s.Status(l, now), false
	}
	if prev <= 0 && cur <= 0 { // nothing counted: the same as a new counter, which a store deletes
		return WindowState{}, WindowState{}.Status(l, now), true
	}
	return windowState(prev, cur, start), windowStatus(prev, cur, start, per, capacity, now.UnixMicro(), sliding), true
}

// Status reports s under l at now as the caller's headers need it:
// Remaining is Capacity minus the count at now (rounded down), Reset the
// time until the counter is empty again (a fixed window: until its window
// ends, whatever it holds, as a quota's).
func (s WindowState) Status(l Limit, now time.Time) Status {
	capacity, per, _, sliding := l.windowed()
	prev, cur, start := s.load()
	prev, cur, start = slide(prev, cur, start, per, now.UnixMicro(), sliding)
	return windowStatus(prev, cur, start, per, capacity, now.UnixMicro(), sliding)
}

// load returns the numbers the core works on; a new counter has nothing
// taken, in a window (start -1) that slide replaces with now's.
func (s WindowState) load() (prev, cur float64, start int64) {
	if s.Start.IsZero() {
		return 0, 0, -1
	}
	return float64(s.Prev), float64(s.Cur), s.Start.UnixMicro()
}

func windowState(prev, cur float64, start int64) WindowState {
	return WindowState{Prev: int64(prev), Cur: int64(cur), Start: time.UnixMicro(start).UTC()}
}

// The window core, mirrored line by line under the same names by the Redis
// scripts in lua/ (core.lua), as the token-bucket and quota cores are:
//
//	prev, cur  units taken in the previous and the current window, float64,
//	           whole numbers in [0, 2^53] (charge clamps them)
//	start      first instant of cur's window, µs since the Unix epoch, a
//	           multiple of per; -1 for a new counter
//	per        window length, µs; now the store's clock, µs
//	capacity   units per window, cost units (float64); sliding: the
//	           sliding-window counter, else the fixed window
//
// The window of now is now − fmod(now, per), exact in float64 and in Lua
// (math.fmod is exact). The weighted count prev × (per − elapsed) / per is
// one product and one division in the same order in Go and Lua, with
// float64(...) around the product so that Go does not fuse it.

// slide brings a counter into now's window: the next window moves cur to
// prev (a fixed window drops it), a later one empties both. A now before
// start (a clock that stepped back) keeps the window: it never moves back.
func slide(prev, cur float64, start, per, now int64, sliding bool) (float64, float64, int64) {
	current := now - int64(math.Mod(float64(now), float64(per)))
	if current <= start {
		return prev, cur, start
	}
	if current == start+per && sliding {
		return cur, 0, current
	}
	return 0, 0, current
}

// weigh is the count a take at now sees: the sliding window's
// prev × (per − elapsed)/per + cur, elapsed = now − start (0 when the clock
// stepped back before start); the fixed window's cur.
func weigh(prev, cur float64, start, per, now int64, sliding bool) float64 {
	if !sliding {
		return cur
	}
	elapsed := now - start
	if elapsed < 0 {
		elapsed = 0
	}
	return float64(prev*float64(per-elapsed)/float64(per)) + cur
}

// fitsAt reports whether cost fits a sliding window at elapsed µs into
// the window whose counts are prev and cur, computed as weigh and
// checkQuota compute it.
func fitsAt(prev, cur float64, per, elapsed int64, capacity, cost float64) bool {
	return float64(prev*float64(per-elapsed)/float64(per))+cur <= capacity-cost
}

// firstFit returns the least elapsed in [0, per) at which cost fits the
// window whose counts are prev and cur, or per when it fits nowhere in it.
// It starts from the rounded-down solution of
// prev × (per − e)/per + cur = capacity − cost and steps while fitsAt
// disagrees, so it is exact for fitsAt's own arithmetic (fitsAt is
// monotone in elapsed).
func firstFit(prev, cur float64, per int64, capacity, cost float64) int64 {
	room := capacity - cost - cur
	if room < 0 {
		return per
	}
	if prev <= 0 || fitsAt(prev, cur, per, 0, capacity, cost) {
		return 0
	}
	f := math.Floor(float64(per) - float64(room*float64(per))/prev)
	if f >= float64(per) {
		return per
	}
	e := int64(f)
	if e < 0 {
		e = 0
	}
	for i := 0; i < 2 && e < per && !fitsAt(prev, cur, per, e, capacity, cost); i++ {
		e = e + 1
	}
	for i := 0; i < 2 && e > 0 && fitsAt(prev, cur, per, e-1, capacity, cost); i++ {
		e = e - 1
	}
	return e
}

// windowWait returns the least whole number of µs after now at which cost
// fits a counter slid to now's window (that it does not fit now): a fixed
// window's end; for a sliding window, the first instant of this window,
// else of the next (cur become prev), at which the weighted count leaves
// room, else the next window's end (both counts gone).
func windowWait(prev, cur float64, start, per, now int64, capacity, cost float64, sliding bool) float64 {
	if !sliding {
		return float64(start + per - now)
	}
	e := firstFit(prev, cur, per, capacity, cost)
	if e < per && start+e > now {
		return float64(start + e - now)
	}
	e = firstFit(cur, 0, per, capacity, cost)
	if e < per {
		return float64(start + per + e - now)
	}
	return float64(start + 2*per - now)
}

// windowReset returns the µs from now until the counter is empty again
// (a fixed window: until its window ends, whatever it holds).
func windowReset(prev, cur float64, start, per, now int64, sliding bool) float64 {
	switch {
	case !sliding:
		return float64(start + per - now)
	case cur > 0:
		return float64(start + 2*per - now)
	case prev > 0:
		return float64(start + per - now)
	}
	return 0
}

// checkWindowAt is phase one of a take from one window counter, run by
// CheckWindow and by the Memory store's Take alike: slide into now's
// window, then check cost against the weighted count (checkQuota's rule: a
// cost above capacity never fits, a cost of zero always does). short is
// the wait in µs when the cost does not fit now but could later; 0
// otherwise.
func checkWindowAt(prev, cur float64, start, per int64, capacity float64, now int64, cost float64, sliding bool) (float64, float64, int64, bool, bool, float64) {
	prev, cur, start = slide(prev, cur, start, per, now, sliding)
	ok, tooLarge := checkQuota(weigh(prev, cur, start, per, now, sliding), capacity, cost)
	var short float64
	if !ok && !tooLarge {
		short = windowWait(prev, cur, start, per, now, capacity, cost, sliding)
	}
	return prev, cur, start, ok, tooLarge, short
}

// applyWindow is a reconciliation delta: slide into now's window, then add
// units to the window the take counted in (taken; -1: the current one):
// cur for the current window, prev for a sliding window's previous one;
// any other window applies to nothing (applied is false).
func applyWindow(prev, cur float64, start, per, now, taken int64, units float64, sliding bool) (float64, float64, int64, bool) {
	prev, cur, start = slide(prev, cur, start, per, now, sliding)
	if taken < 0 || taken == start {
		return prev, charge(cur, units), start, true
	}
	if sliding && taken == start-per {
		return charge(prev, units), cur, start, true
	}
	return prev, cur, start, false
}

// windowExpiry returns the µs from now until a counter's state may be
// forgotten: when its current window (a sliding window: the next one too)
// has ended and nothing it counts still weighs.
func windowExpiry(start, per, now int64, sliding bool) float64 {
	if sliding {
		return float64(start + 2*per - now)
	}
	return float64(start + per - now)
}

func windowStatus(prev, cur float64, start, per int64, capacity float64, now int64, sliding bool) Status {
	return Status{
		Remaining: floorUnits(capacity - weigh(prev, cur, start, per, now, sliding)),
		Reset:     micros(windowReset(prev, cur, start, per, now, sliding)),
	}
}
