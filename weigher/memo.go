package weigher

// pieceMemo remembers the token counts of recently counted pieces of 2 to
// 16 bytes: natural text repeats its words, and a piece found here costs
// one lookup in a table that stays in the CPU's cache (96 KiB) instead of a
// lookup in the 4 MiB rank table — a cache miss on text that does not
// repeat exactly — or a whole byte-pair merge for a word of several tokens.
// Direct-mapped: a piece that lands on another's slot replaces it. A memo
// belongs to one counter (counts differ by vocabulary) and one goroutine at
// a time: counters keep them in a sync.Pool, so each CPU reuses a warm one.
type pieceMemo struct {
	slots [memoSlots]memoSlot
}

// memoSlots is the memo's size, a power of two: 4,096 slots of 24 bytes.
const memoSlots = 1 << 12

// memoSlot is one remembered piece: its first 8 bytes in lo and the rest
// zero-padded in hi (little-endian), its length (0: an empty slot) and its
// tokens.
type memoSlot struct {
	lo, hi uint64
	n      uint8
	tokens uint8
}

// memoTokens is c.pieceTokens(p), remembered in m for pieces of 2 to 16
// bytes (one byte is one token; a longer piece is rarer and its merge
// dwarfs a lookup).
func (c *bpeCounter) memoTokens(m *pieceMemo, p string) int64 {
	if len(p) < 2 || len(p) > 16 {
		return c.pieceTokens(p)
	}
	var lo, hi uint64
	if len(p) <= 8 {
		lo = pack(p)
	} else {
		lo, hi = pack(p[:8]), pack(p[8:])
	}
	s := &m.slots[midHash(lo, hi, len(p))>>(64-12)]
	if int(s.n) == len(p) && s.lo == lo && s.hi == hi {
		return int64(s.tokens)
	}
	t := c.pieceTokens(p) // at most 16: a piece never has more tokens than bytes
	*s = memoSlot{lo: lo, hi: hi, n: uint8(len(p)), tokens: uint8(t)}
	return t
}
