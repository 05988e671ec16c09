package weigher

import "math/bits"

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
	// texts are the counts of whole short texts (textMemo), which
	// countIn looks up before it splits a text into pieces.
	texts textMemo
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

// memoTokens is c.pieceTokens(text[i:j]), remembered in m for pieces of 2
// to 16 bytes (one byte is one token; a longer piece is rarer and its merge
// dwarfs a lookup). The piece's key and hash are made once, from at most
// two 8-byte loads of text, and serve both the memo and, on a miss, the
// rank table.
func (c *bpeCounter) memoTokens(m *pieceMemo, text string, i, j int) int64 {
	n := j - i
	if n < 2 || n > 16 {
		return c.pieceTokensIn(m, text[i:j])
	}
	// pieceKey, written out: it does not inline (its cost is three times
	// the budget), and its call cost a piece about 12 instructions.
	var lo, hi, h uint64
	if i+16 <= len(text) {
		w := text[i : i+16]
		lo, hi = le64(w[:8]), le64(w[8:16])
		if n <= 8 {
			lo, hi = lo&(^uint64(0)>>((64-8*n)&63)), 0
		} else {
			hi &= ^uint64(0) >> ((128 - 8*n) & 63)
		}
	} else {
		lo, hi = pieceKeyPacked(text, i, n)
	}
	if n <= 8 {
		h = hashKey(lo, n)
	} else {
		h = midHash(lo, hi, n)
	}
	s := &m.slots[h>>(64-12)]
	if int(s.n) == n && s.lo == lo && s.hi == hi {
		return int64(s.tokens)
	}
	return c.memoMiss(s, text[i:j], lo, hi, h)
}

// memoMiss is the tokens of piece p (2 to 16 bytes), with key lo, hi and
// hash h (pieceKey's and memoTokens'), not found in its memo slot s: from
// the rank table, else the merge, and remembered in s.
func (c *bpeCounter) memoMiss(s *memoSlot, p string, lo, hi, h uint64) int64 {
	var t int64 = 1
	if _, ok := c.ranks.lookup(lo, hi, len(p), h); !ok {
		t = c.mergeTokens(p) // at most 16: a piece never has more tokens than bytes
	}
	*s = memoSlot{lo: lo, hi: hi, n: uint8(len(p)), tokens: uint8(t)}
	return t
}

// pieceKey is the rank table's key of text[i:i+n] (1 ≤ n ≤ 16): its first 8
// bytes little-endian in lo, the rest zero-padded in hi (0 when n ≤ 8), as
// pack makes them. Where 16 bytes of text remain it loads whole words and
// masks them. Its shifts, like every variable shift of a key here and in
// ranks.go and countPiecesIn, are written "(…) & 63": each is below 64 for
// the lengths it serves, and without the mask Go tests for a wider shift
// (which it must make 0) on every piece, some 6 instructions each.
func pieceKey(text string, i, n int) (lo, hi uint64) {
	if i+16 > len(text) {
		return pieceKeyPacked(text, i, n)
	}
	w := text[i : i+16]
	lo, hi = le64(w[:8]), le64(w[8:16])
	if n <= 8 {
		return lo & (^uint64(0) >> ((64 - 8*n) & 63)), 0
	}
	return lo, hi & (^uint64(0) >> ((128 - 8*n) & 63))
}

// pieceKeyPacked is pieceKey near the end of text: where text holds 8
// bytes before the piece's end it loads the word ending there and shifts
// it down (a short text's every piece is near its end), else it packs
// byte by byte. Kept apart from the common case, which memoTokens writes
// out.
func pieceKeyPacked(text string, i, n int) (lo, hi uint64) {
	e := i + n
	if n <= 8 {
		if e >= 8 {
			return le64(text[e-8:e]) >> ((64 - 8*n) & 63), 0
		}
		return pack(text[i:e]), 0
	}
	// 9 to 16 bytes: i+8 ≤ e, and e ≥ 9 bytes of text
	return le64(text[i : i+8]), le64(text[e-8:e]) >> ((128 - 8*n) & 63)
}

// le64 is the first 8 bytes of s (at least 8) as a little-endian integer,
// in one load.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// textMemo remembers the token counts of recently counted short texts, of
// 2 to textMemoBytes bytes, whole: a tool's property ("query:string:Words
// to search for"), an enum value, a short message ("Continue.") recur
// across requests and conversations, in lists and bodies that are new as
// a whole, which the count cache keys on; such a text of 20 to 40 bytes
// costs about 1,000 instructions to count piece by piece (its pieces are
// mostly in the piece memo already) and about 100 to find here. A slot
// holds the text's bytes, so a count is found only for the same bytes:
// the counts are the counter's (TestTextMemoSameCounts). Direct-mapped
// and keyed by a hash of a few words of the text (textSlot): texts that
// share a slot replace each other, which costs misses, never a wrong
// count. Part of a pieceMemo, so it has the piece memo's owner rules (one
// counter, one goroutine at a time). Size: textMemoSlots × 52 bytes,
// 26 KiB.
type textMemo struct {
	slots [textMemoSlots]textMemoSlot
}

// textMemoSlots is the text memo's number of slots, a power of two
// (textMemoShift is 64 minus its log2).
const (
	textMemoSlots = 1 << 9
	textMemoShift = 64 - 9
)

// textMemoBytes is the longest text, in bytes, the text memo holds.
const textMemoBytes = 48

// textMemoPiece marks a textMemoSlot's length as a piece's (a segment of
// cutMerge), whose count is a merge's: a text of the same bytes counts
// its pre-tokenizer's pieces, which may differ.
const textMemoPiece = 0x80

// textMemoSlot is one remembered text: its bytes, its length (0: an empty
// slot; with textMemoPiece set, the bytes are a segment of a long piece,
// cutMerge's, and the tokens its byte-pair merge's) and its tokens (at
// most 3 × 48: a bad byte counts as U+FFFD).
type textMemoSlot struct {
	text   [textMemoBytes]byte
	n      uint8
	tokens uint16
}

// slot is the slot of s (2 to textMemoBytes bytes).
func (m *textMemo) slot(s string) *textMemoSlot { return &m.slots[textSlot(s)] }

// holds reports whether sl holds s with mark (0: a text's count;
// textMemoPiece: a piece's merge).
func (sl *textMemoSlot) holds(s string, mark uint8) bool {
	return sl.n == uint8(len(s))|mark && string(sl.text[:len(s)]) == s
}

// keep remembers in sl that s, with mark (as holds'), counts n tokens.
func (sl *textMemoSlot) keep(s string, mark uint8, n int64) {
	copy(sl.text[:], s)
	sl.n, sl.tokens = uint8(len(s))|mark, uint16(n)
}

// textSlot is the slot index of text t (2 to textMemoBytes bytes): a hash
// of its length, its first and last 8 bytes and, past 16 bytes, the 8 in
// its middle (the whole text when shorter than 8).
func textSlot(t string) uint64 {
	n := len(t)
	var a, b uint64
	if n >= 8 {
		a, b = le64(t[:8]), le64(t[n-8:])
		if n > 16 {
			b ^= bits.RotateLeft64(le64(t[n/2-4:]), 29)
		}
	} else {
		a = pack(t)
	}
	h := (a*0x9e3779b97f4a7c15 ^ b*0xc2b2ae3d27d4eb4f) + uint64(n)
	h ^= h >> 31
	return (h * 0xbf58476d1ce4e5b9) >> textMemoShift
}
