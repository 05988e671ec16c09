package weigher

import (
	"math/bits"
	"strings"

	"github.com/zeebo/xxh3"
)

// prefixHashOf is the prefix hash of p under seed, made afresh (what
// prefixHash makes incrementally): xxh3's 128-bit hash, seeded, of p after
// prefixPad zero bytes when p holds at most maxPaddedPrefix bytes, of p
// alone when it is longer. Prefix hashes are compared only between
// prefixes of one length (a point's k), which are hashed alike: the pad
// being fixed, two such prefixes have one hash only when the seeded hash
// collides on two inputs, as the count cache's keys would.
func prefixHashOf(seed uint64, p string) xxh3.Uint128 {
	if len(p) <= maxPaddedPrefix {
		p = strings.Repeat("\x00", prefixPad) + p
	}
	return xxh3.HashString128Seed(p, seed)
}

// Purge drops every entry (the sets stay made).
func (t *countTable) Purge() {
	for i := range t.sets {
		s := &t.sets[i]
		s.mu.Lock()
		t.n.Add(-int64(bits.OnesCount8(s.used)))
		s.used, s.ref, s.hand = 0, 0, 0
		s.mu.Unlock()
	}
}
