package bucket

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// idTable is one generation of recentIDs: request ids (idKey) with a mark
// each, in an open-addressed table probed linearly. Ids are only ever
// added or re-marked, never removed one by one (a generation is dropped
// whole), so the table needs no deletion markers: a look-up walks from
// the key's home slot to the key or to the first unused slot.
//
// It replaces a map[idKey]mark (perf25, issue #13, callgrind): a Go map
// assignment of the 32-byte key cost some 230 instructions (380 while
// the map grew), a look-up 125; here a look-up is a hash of some 20
// instructions and a walk of a few slots (one 32-byte compare each), and
// the add after it hashes and walks again. The memory store's take and
// reconcile of a 1 KiB request cost 240 to 540 instructions fewer.
//
// The zero value is empty and allocates on its first set. Not safe for
// concurrent use: its shard's mutex guards it.
type idTable struct {
	slots []idSlot // len a power of two, or nil
	n     int      // slots used
	shift uint8    // 64 − log2(len(slots)): the hash's top bits pick the home slot
	seed  uint64   // drawn when slots is allocated
}

// idSlot is one slot of an idTable: used, it holds k's mark m (markNone
// included: a mark set to none is still an id held, as in the map it
// replaces).
type idSlot struct {
	k    idKey
	m    mark
	used bool
}

// idTableMinSlots is the smallest table allocated: twelve ids at most
// (idTableFull).
const idTableMinSlots = 16

// idTableFull reports whether a table of size slots holding n ids is
// full: more than three quarters of its slots used. A slot is 40 bytes
// (the 32-byte key, the mark, the used flag, padding), so an id costs 53
// to 107 bytes, as in the Go map it replaces (40-byte slots and a control
// byte each, up to seven eighths full: 47 to 94); linear probing walks
// some 2.5 slots to an id and 8.5 to a miss when three quarters full.
func idTableFull(n, size int) bool { return 4*n > 3*size }

// hash is k's hash under seed: its four words multiplied by odd
// constants and folded (constants: splitmix64's and xxhash's primes).
func (k *idKey) hash(seed uint64) uint64 {
	h := (binary.LittleEndian.Uint64(k.b[0:]) ^ seed) * 0x9E3779B97F4A7C15
	h = (h ^ binary.LittleEndian.Uint64(k.b[8:])) * 0xC2B2AE3D27D4EB4F
	h = (h ^ binary.LittleEndian.Uint64(k.b[16:])) * 0x165667B19E3779F9
	h = (h ^ k.tail) * 0xBF58476D1CE4E5B9
	return h ^ h>>31
}

// len is the number of ids t holds.
func (t *idTable) len() int { return t.n }

// find returns the slot of k in t and true, or the unused slot where k
// would go and false; t must have slots.
func (t *idTable) find(k *idKey) (int, bool) {
	mask := len(t.slots) - 1
	i := int(k.hash(t.seed) >> t.shift)
	for {
		s := &t.slots[i]
		if !s.used {
			return i, false
		}
		if s.k == *k {
			return i, true
		}
		i = (i + 1) & mask
	}
}

// get returns k's mark and whether t holds k.
func (t *idTable) get(k *idKey) (mark, bool) {
	if t.n == 0 {
		return markNone, false
	}
	i, ok := t.find(k)
	if !ok {
		return markNone, false
	}
	return t.slots[i].m, true
}

// set gives k the mark m, adding k when t does not hold it; a table
// without slots is made with room for hint ids. It returns k's old mark
// and whether t held k.
func (t *idTable) set(k *idKey, m mark, hint int) (old mark, held bool) {
	if t.slots == nil {
		t.alloc(hint + 1)
	}
	i, ok := t.find(k)
	if ok {
		old = t.slots[i].m
		t.slots[i].m = m
		return old, true
	}
	if idTableFull(t.n+1, len(t.slots)) {
		t.grow()
		i, _ = t.find(k)
	}
	t.slots[i] = idSlot{k: *k, m: m, used: true}
	t.n++
	return markNone, false
}

// alloc gives t empty slots for n ids at least.
func (t *idTable) alloc(n int) {
	size := idTableMinSlots
	for idTableFull(n, size) {
		size <<= 1
	}
	t.slots = make([]idSlot, size)
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	t.seed = rand.Uint64()
	t.n = 0
}

// grow moves t's ids into a table twice the size.
func (t *idTable) grow() {
	old := t.slots
	t.alloc(len(old)) // room for len(old) ids: twice the slots
	for i := range old {
		if s := &old[i]; s.used {
			j, _ := t.find(&s.k)
			t.slots[j] = *s
			t.n++
		}
	}
}
