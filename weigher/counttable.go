package weigher

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// countWays is how many entries share a set of the count table.
const countWays = 8

// countTable is the count cache's bounded store of entries by slot
// (cacheKey.slot): a fixed array of sets of countWays entries, made once
// for its size, a slot's set chosen by the slot (a seeded hash, so keys
// spread evenly). Each set has its own lock, so two lookups at once wait
// for each other only when they fall in one set.
//
// Eviction is CLOCK within the set: a lookup that finds an entry marks it
// referenced; a write to a full set advances the set's hand past the
// referenced entries (clearing their marks) to the first unreferenced one
// and replaces it; a new entry starts unreferenced. Entries written once
// and not read since go oldest first, as under LRU, and one read since the
// hand last passed stays a round more. Where golang-lru's list allocated a
// node and grew its map on every write (about 1,300 instructions), a write
// here copies the entry into its way.
//
// Safe for concurrent use.
type countTable struct {
	sets []countSet
	n    atomic.Int64 // entries held
}

// countSet is one set of a countTable: its ways, which are in use (used,
// bit i for ways[i]) and referenced since the hand last passed (ref), and
// the hand (the way the next eviction looks at first).
type countSet struct {
	mu        sync.Mutex
	used, ref uint8
	hand      uint8
	ways      [countWays]countWay
}

// countWay is one entry of a set, under its slot.
type countWay struct {
	slot uint64
	e    entry
}

// newCountTable returns an empty table of size entries (rounded up to
// whole sets, at least one).
func newCountTable(size int) *countTable {
	t := &countTable{sets: make([]countSet, max((size+countWays-1)/countWays, 1))}
	// Touch every page now: a large allocation comes untouched from the
	// OS, and the lookups, spread over the whole table, would otherwise
	// fault its pages in one by one on the request path.
	for i := range t.sets {
		t.sets[i].hand = 0
	}
	return t
}

// set is the set holding slot: the slot's high bits scaled to the sets.
func (t *countTable) set(slot uint64) *countSet {
	hi, _ := bits.Mul64(slot, uint64(len(t.sets)))
	return &t.sets[hi]
}

// Get returns the entry under slot, marking it referenced; false when
// there is none.
func (t *countTable) Get(slot uint64) (entry, bool) {
	s := t.set(slot)
	s.mu.Lock()
	for i := range s.ways {
		if s.used&(1<<i) != 0 && s.ways[i].slot == slot {
			s.ref |= 1 << i
			e := s.ways[i].e
			s.mu.Unlock()
			return e, true
		}
	}
	s.mu.Unlock()
	return entry{}, false
}

// Add holds e under slot: in place of the entry under slot, or in a free
// way, or in place of the entry the set's hand evicts (see countTable).
func (t *countTable) Add(slot uint64, e entry) {
	s := t.set(slot)
	s.mu.Lock()
	for i := range s.ways {
		if s.used&(1<<i) != 0 && s.ways[i].slot == slot {
			s.ways[i].e = e
			s.mu.Unlock()
			return
		}
	}
	var i int
	if s.used != 1<<countWays-1 {
		i = bits.TrailingZeros8(^s.used)
		s.used |= 1 << i
		t.n.Add(1)
	} else {
		// At most one round clears every mark, so the second finds one.
		for {
			i = int(s.hand)
			s.hand = (s.hand + 1) % countWays
			if s.ref&(1<<i) == 0 {
				break
			}
			s.ref &^= 1 << i
		}
	}
	s.ref &^= 1 << i
	s.ways[i] = countWay{slot: slot, e: e}
	s.mu.Unlock()
}

// Len is the number of entries held.
func (t *countTable) Len() int { return int(t.n.Load()) }
