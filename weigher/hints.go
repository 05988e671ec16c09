package weigher

import (
	"sync/atomic"

	"github.com/zeebo/xxh3"
)

// Where a remembered element ends. The strict scan steps over an element
// the count cache vouches for, but must first find where it ends, to hash
// exactly its bytes: jsonscan.Skip, a pass over the element that stops at
// every quote (an escaped one too), cost a warm 128 KiB conversation a
// third of its weighing. An end hint says, from an element's first
// hintPrefix bytes, how long the last element seen passing with that start
// was; the scan then offers Vouch those bytes, whose hash and lookup decide
// as before (jsonscan.KnownEnds). A hint is only a guess: a wrong or stale
// one costs a hash of the bytes it names, and the scan falls back to Skip.
//
// Hints live in a table of fixed size beside the cache, one 64-bit word a
// slot, read and written with atomic loads and stores (no lock; a slot
// overwritten by another request's element is a wrong guess, nothing
// worse). A lookup is a hash of hintPrefix bytes and one load, against the
// locked map lookup of a count (about 600 instructions when the cache was
// otter's). The same table holds the resume lookup's probe hints
// (resume.go, "Probe hints"), under hashes seeded apart (probeHash): a
// slot one kind takes from the other is a lost hint, and a value read
// under the other's tag is no size End guesses (below minCachedBytes)
// nor a key index probeHint takes (over resumeKeyLens).

// hintPrefix is the length, in bytes, of the start of an element its end
// hint is keyed by: long enough that a conversation's messages differ
// within it (role, tool call ids, the first words), short enough to hash in
// a few nanoseconds. A shorter element's hint is keyed by its bytes and
// those that follow it (it is the same element whenever they recur); an
// element that starts fewer than hintPrefix bytes before the body's end
// has no hint. Short elements were left to Skip, but at 1 KiB, where most
// messages are short, that was 5% of a warm body's instructions.
const hintPrefix = 128

// hintShare is the share of Options.CacheBytes the hint table takes (its
// slots, 8 bytes each): 1/32, a slot for each of the ~175,000 entries the
// default 32 MiB hold, rounded down to a power of two (131,072 slots).
const hintShare = 32

// hintTable is a direct-mapped table of end hints. Safe for concurrent
// use. A nil table holds nothing.
type hintTable struct {
	slots []atomic.Uint64 // tag (high 32 bits of the hash) << 32 | size; 0: empty
	mask  uint64
}

// newHintTable returns a table of at most bytes, in bytes (the largest
// power of two of 8-byte slots that fits); nil below one slot.
func newHintTable(bytes int64) *hintTable {
	n := int64(1)
	for n*2*8 <= bytes {
		n *= 2
	}
	if n*8 > bytes {
		return nil
	}
	return &hintTable{slots: make([]atomic.Uint64, n), mask: uint64(n - 1)}
}

// bytes is the table's memory, in bytes.
func (t *hintTable) bytes() int64 {
	if t == nil {
		return 0
	}
	return int64(len(t.slots)) * 8
}

// get returns the size hinted for the element whose hint hash is h, 0
// when none.
func (t *hintTable) get(h uint64) int {
	if t == nil {
		return 0
	}
	w := t.slots[h&t.mask].Load()
	if uint32(w>>32) != uint32(h>>32) {
		return 0
	}
	return int(uint32(w))
}

// put records size (positive, below 2³²) for the element whose hint hash
// is h.
func (t *hintTable) put(h uint64, size int) {
	if t == nil {
		return
	}
	s := &t.slots[h&t.mask]
	w := h>>32<<32 | uint64(uint32(size))
	if s.Load() != w {
		s.Store(w)
	}
}

// hintHash is the hint hash of an element offered to Vouch in the context
// ctx whose first hintPrefix bytes are prefix.
func (c *countCache) hintHash(ctx uint64, prefix string) uint64 {
	return xxh3.HashStringSeed(prefix, c.seed^ctx)
}
