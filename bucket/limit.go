package bucket

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalid reports a caller's mistake rather than a store failure: a Limit
// that Validate refuses, a negative cost, or the same key twice in one Take.
// Store methods wrap it; test with errors.Is.
var ErrInvalid = errors.New("invalid input")

// maxUnits is the largest capacity or rate a Limit may have: every integer up
// to 2^53 is exact in a float64 (and in a Lua number).
const maxUnits = 1 << 53

// Validate reports whether l can be used. A token bucket's Capacity and
// Rate must be in [1, 2^53] units and Per at least one microsecond (Per is
// used at microsecond resolution; a sub-microsecond remainder is ignored). A
// quota's Capacity must be in [1, 2^53] units and its window non-empty at
// microsecond resolution, between the Unix epoch and 2^53µs after it (year
// 2255); its Rate and Per are ignored. A window counter's Capacity must be
// in [1, 2^53] units, its Per in [1µs, 2^50µs], its WindowEnd zero and its
// WindowStart zero or a window of Per; its Rate is ignored. The error wraps
// ErrInvalid.
func (l Limit) Validate() error {
	if err := l.validate(); err != nil {
		return fmt.Errorf("bucket: limit: %w", err)
	}
	return nil
}

// The instants a quota's window may use: every µs count in [0, 2^53) is
// exact in a float64 (and in a Lua number).
var (
	minWindow = time.UnixMicro(0)
	maxWindow = time.UnixMicro(maxUnits)
)

func (l *Limit) validate() error {
	if l.Capacity < 1 || l.Capacity > maxUnits {
		return fmt.Errorf("capacity %d is not in [1, 2^53]: %w", l.Capacity, ErrInvalid)
	}
	if l.Concurrent {
		return l.validateSlots()
	}
	if l.IsQuota() {
		return l.validateWindow()
	}
	switch l.Algorithm {
	case TokenBucket:
	case SlidingWindow, FixedWindow:
		return l.validateWindowLimit()
	default:
		return fmt.Errorf("%v is not an algorithm: %w", l.Algorithm, ErrInvalid)
	}
	switch {
	case l.Rate < 1 || l.Rate > maxUnits:
		return fmt.Errorf("rate %d is not in [1, 2^53]: %w", l.Rate, ErrInvalid)
	case l.Per < time.Microsecond:
		return fmt.Errorf("per %v is under 1µs: %w", l.Per, ErrInvalid)
	}
	return nil
}

func (l Limit) validateWindow() error {
	switch {
	case l.WindowStart.IsZero() || l.WindowEnd.IsZero():
		return fmt.Errorf("quota window [%v, %v) lacks a bound: %w", l.WindowStart, l.WindowEnd, ErrInvalid)
	case l.WindowStart.Before(minWindow) || !l.WindowEnd.Before(maxWindow):
		return fmt.Errorf("quota window [%v, %v) is not within [1970, 2255): %w", l.WindowStart, l.WindowEnd, ErrInvalid)
	case l.WindowEnd.UnixMicro() <= l.WindowStart.UnixMicro():
		return fmt.Errorf("quota window [%v, %v) is empty: %w", l.WindowStart, l.WindowEnd, ErrInvalid)
	}
	return nil
}

// floats returns a token bucket's l in the numbers the arithmetic works on:
// capacity and rate in units, per in microseconds.
func (l *Limit) floats() (capacity, rate, per float64) {
	return float64(l.Capacity), float64(l.Rate), float64(l.Per / time.Microsecond)
}

// window returns a quota's l in the numbers the arithmetic works on:
// capacity in units, the window's bounds in µs since the Unix epoch.
func (l *Limit) window() (capacity float64, windowStart, windowEnd int64) {
	return float64(l.Capacity), l.WindowStart.UnixMicro(), l.WindowEnd.UnixMicro()
}

// validateItems checks a Take's items: valid limits, costs >= 0 and no key
// twice (two items on one bucket would each check the level before the
// other's cost; give the bucket one item with the summed cost instead).
func validateItems(items []Item) error {
	for i := range items {
		it := &items[i]
		if err := it.Limit.validate(); err != nil {
			return &StoreError{Op: "take", Subject: it.Key, Err: err}
		}
		if it.Limit.Concurrent && it.Cost > 1 {
			return &StoreError{Op: "take", Subject: it.Key, Err: fmt.Errorf("cost %d of an in-flight limit is not 0 or 1: %w", it.Cost, ErrInvalid)}
		}
		if it.Cost < 0 {
			return &StoreError{Op: "take", Subject: it.Key, Err: fmt.Errorf("cost %d is negative: %w", it.Cost, ErrInvalid)}
		}
		for j := range i {
			if items[j].Key == it.Key {
				return &StoreError{Op: "take", Subject: it.Key, Err: fmt.Errorf("key appears twice: %w", ErrInvalid)}
			}
		}
	}
	return nil
}

// validateDeltas checks a Reconcile's deltas: valid limits. A key may appear
// more than once; its deltas apply in order.
func validateDeltas(requestID string, deltas []Delta) error {
	for i := range deltas {
		d := &deltas[i]
		if err := d.Limit.validate(); err != nil {
			return &StoreError{Op: "reconcile", Subject: requestID, Err: fmt.Errorf("key %q: %w", d.Key, err)}
		}
	}
	return nil
}
