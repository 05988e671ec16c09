package weigher

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// lruShardCount is how many LRU lists the count cache is split into, by
// the key's top bits: golang-lru locks its list on every lookup (a hit
// moves the entry to the front), and one list for the whole process would
// put every weighing of every request behind one mutex. With 16, two
// lookups at once take the same lock one time in 16. (One list showed no
// contention at concurrency 32 on a 2-core machine; many cores were not
// measured, and 16 is not tuned.)
const lruShardCount = 16

// lruShards is a bounded cache of count entries by slot: lruShardCount
// golang-lru LRU lists, a key's list chosen by its slot's top 4 bits (the
// slot is a seeded hash, so keys spread evenly). Each list holds at most
// its share of the bound (at least one entry, so a bound under
// lruShardCount entries holds up to lruShardCount), and a list
// drops its own least recently used entry when full: about the whole's
// least recently used, as the keys spread evenly. Safe for concurrent use.
type lruShards struct {
	lists [lruShardCount]*lru.Cache[uint64, entry]
}

// newLRUShards returns lists holding at most size entries in all (each
// at least one).
func newLRUShards(size int) *lruShards {
	s := &lruShards{}
	for i := range s.lists {
		l, err := lru.New[uint64, entry](shardSize(size))
		if err != nil {
			panic("weigher: " + err.Error()) // only for a size below 1, which shardSize never returns
		}
		s.lists[i] = l
	}
	return s
}

// shardSize is one list's share of size entries, at least one.
func shardSize(size int) int { return max(size/lruShardCount, 1) }

// list is the list holding slot.
func (s *lruShards) list(slot uint64) *lru.Cache[uint64, entry] {
	return s.lists[slot>>60]
}

// Get returns the entry under slot, making it its list's most recently
// used; false when there is none.
func (s *lruShards) Get(slot uint64) (entry, bool) { return s.list(slot).Get(slot) }

// Add holds e under slot, dropping its list's least recently used entry
// when the list is full.
func (s *lruShards) Add(slot uint64, e entry) { s.list(slot).Add(slot, e) }

// Len is the number of entries held.
func (s *lruShards) Len() int {
	n := 0
	for _, l := range s.lists {
		n += l.Len()
	}
	return n
}

// Purge drops every entry.
func (s *lruShards) Purge() {
	for _, l := range s.lists {
		l.Purge()
	}
}

// Resize bounds the lists to size entries in all, dropping the least
// recently used entries of each as needed.
func (s *lruShards) Resize(size int) {
	for _, l := range s.lists {
		l.Resize(shardSize(size))
	}
}
