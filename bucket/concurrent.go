package bucket

import (
	"fmt"
	"strings"
	"time"
)

// An in-flight limit (Limit.Concurrent) counts the requests holding a slot
// of it: a take of cost 1 adds its request id as a holder, with an expiry
// of now plus the slot lease (Limit.Per); a Reconcile delta of negative
// units or a Void under that request id removes it (the release), and a
// holder whose expiry has passed no longer counts (the lease reclaims the
// slot of a holder that died before its release). A take of cost 0 holds
// nothing and only reports the status. Memory keeps a map of holders per
// key; the Redis scripts a sorted set of holders scored by expiry (µs),
// the key expiring a second past the lease of its newest holder. The
// functions below are mirrored line by line, under the same names, by
// lua/core.lua and lua/take.lua:
//
//	live      holders whose expiry is after now, float64
//	capacity  slots, cost 0 or 1 (float64)

// MaxSlots is the largest Capacity of an in-flight limit: a take counts
// the holders of its key (Memory walks them), so the bound keeps a take's
// work and a key's size bounded.
const MaxSlots = 100000

// MinSlotLease and MaxSlotLease bound an in-flight limit's slot lease
// (Limit.Per): the lease is the longest a request can count as in flight,
// so it must outlast the longest response served (see the README).
const (
	MinSlotLease = time.Second
	MaxSlotLease = 24 * time.Hour
)

// SlotRetry is the Retry-After of a denial by an in-flight limit: a slot
// frees when any request in flight ends, which no store can foresee, so a
// denied caller is told to look again shortly.
const SlotRetry = time.Second

// slotRetry is SlotRetry in µs, as the core works.
const slotRetry = float64(SlotRetry / time.Microsecond)

// validateSlots checks an in-flight limit: Capacity in [1, MaxSlots], a
// lease in [MinSlotLease, MaxSlotLease], no rate and no window.
func (l Limit) validateSlots() error {
	switch {
	case l.Capacity > MaxSlots:
		return fmt.Errorf("in-flight capacity %d is above %d: %w", l.Capacity, MaxSlots, ErrInvalid)
	case l.Per < MinSlotLease || l.Per > MaxSlotLease:
		return fmt.Errorf("in-flight lease %v is not in [%v, %v]: %w", l.Per, MinSlotLease, MaxSlotLease, ErrInvalid)
	case l.Rate != 0 || l.IsQuota():
		return fmt.Errorf("an in-flight limit has no rate and no window: %w", ErrInvalid)
	}
	return nil
}

// validateHolders checks that a take whose items hold slots names its
// holder: a concurrent item of cost 1 needs a request id.
func validateHolders(requestID string, items []Item) error {
	if requestID != "" {
		return nil
	}
	for _, it := range items {
		if it.Limit.Concurrent && it.Cost > 0 {
			return &StoreError{Op: "take", Subject: it.Key, Err: fmt.Errorf("an in-flight slot needs a request id: %w", ErrInvalid)}
		}
	}
	return nil
}

// checkSlots is phase one for one in-flight limit: can cost slots be held
// now, and can they ever (a cost above capacity never passes). A cost of
// zero always passes.
func checkSlots(live, capacity, cost float64) (ok, tooLarge bool) {
	if cost > capacity {
		return false, true
	}
	return cost == 0 || live <= capacity-cost, false
}

// slotReset is the Reset of an in-flight limit with live holders: zero
// while a slot is free, else slotRetry (when to look again).
func slotReset(live, capacity float64) float64 {
	if live < capacity {
		return 0
	}
	return slotRetry
}

func slotStatus(live, capacity float64) Status {
	return Status{Remaining: floorUnits(capacity - live), Reset: micros(slotReset(live, capacity))}
}

// slotLease is the lease of l in µs.
func (l Limit) slotLease() int64 { return int64(l.Per / time.Microsecond) }

// holders is one in-flight limit's state in Memory: request id → expiry,
// µs since the Unix epoch.
type holders map[string]int64

// live counts the holders whose expiry is after now.
func (h holders) live(now int64) float64 {
	n := 0
	for _, exp := range h {
		if exp > now {
			n++
		}
	}
	return float64(n)
}

// hold adds holder with its expiry, first forgetting every expired holder.
func (s *shard) hold(key, holder string, expiry, now int64) {
	if s.slots == nil {
		s.slots = make(map[string]holders)
	}
	h := s.slots[key]
	if h == nil {
		h = make(holders)
		s.slots[strings.Clone(key)] = h
	}
	for id, exp := range h {
		if exp <= now {
			delete(h, id)
		}
	}
	h[strings.Clone(holder)] = expiry
}

// release removes holder from key's slots.
func (s *shard) release(key, holder string) {
	h := s.slots[key]
	if h == nil {
		return
	}
	delete(h, holder)
	if len(h) == 0 {
		delete(s.slots, key)
	}
}

// sweepSlots forgets expired holders, and keys left with none.
func (s *shard) sweepSlots(now int64) {
	for key, h := range s.slots {
		for id, exp := range h {
			if exp <= now {
				delete(h, id)
			}
		}
		if len(h) == 0 {
			delete(s.slots, key)
		}
	}
}

// InFlight reports how many holders key's in-flight limit counts at the
// store's now: for tests and read-outs.
func (m *Memory) InFlight(key string) int {
	sh := &m.shards[m.shardOf(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return int(sh.slots[key].live(m.now().UnixMicro()))
}
