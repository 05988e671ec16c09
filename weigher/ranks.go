package weigher

import (
	"cmp"
	"math/bits"
	"slices"
	"strings"
)

// rankTable maps a token's bytes to its rank, built for the byte-pair
// merge's lookups: almost all of them are of strings of at most 8 bytes
// (about 70% of each vocabulary's tokens), which live inline in one flat
// open-addressed array, so a lookup costs one memory access instead of the
// three or four dependent ones of a Go map of strings. On text that does
// not repeat (base64, random letters, CJK), lookups miss the cache and that
// difference is most of the counting time. Tokens of 9 to 16 bytes live in
// a second flat array; the few longer ones (about 2% of o200k_base) in a Go
// map of their own. Only that small map holds pointers: the table keeps no
// map of the whole vocabulary (200,000 strings) alive for the garbage
// collector to scan on every cycle.
//
// It is immutable after newRankTable and safe for concurrent use.
type rankTable struct {
	slots []rankSlot // power-of-two length, at most 3/4 full
	shift uint       // 64 − log2(len(slots))
	// filter has two bits set per short token (a Bloom filter of 2^21 bits,
	// 256 KiB, that stays in cache): most lookups of strings that are not
	// tokens, which the merge of text that does not repeat makes as often
	// as the others, end there without touching slots.
	filter []uint64
	// mid holds the tokens of 9 to 16 bytes (about a quarter of each
	// vocabulary: " implementation", "_configuration"), two words a key,
	// open-addressed like slots; the filter covers them too.
	mid      []midSlot
	midShift uint
	long     map[string]int32 // the tokens over 16 bytes
}

// midSlot is one token of 9 to 16 bytes: its first 8 bytes in lo, the rest
// zero-padded in hi (both little-endian), its length and rank. n == 0
// marks an empty slot.
type midSlot struct {
	lo, hi uint64
	rank   int32
	n      uint8
}

// midHash mixes a 9-to-16-byte key: its top bits pick the home slot, its
// low bits the filter's.
func midHash(lo, hi uint64, n int) uint64 {
	return hashKey(lo^bits.RotateLeft64(hi, 31)*0x94d049bb133111eb, n)
}

const filterBits = 21

// rankSlot is one token of 1 to 8 bytes: its bytes little-endian in key
// (zero-padded), its length, and its rank. n == 0 marks an empty slot.
type rankSlot struct {
	key  uint64
	rank int32
	n    uint8
}

// newRankTable indexes ranks.
func newRankTable(ranks map[string]int) *rankTable {
	short := 0
	for tok := range ranks {
		if len(tok) >= 1 && len(tok) <= 8 {
			short++
		}
	}
	size := 1 << bits.Len(uint(short*4/3)) // at most 3/4 full: about half
	t := &rankTable{slots: make([]rankSlot, size), shift: uint(64 - bits.Len(uint(size-1))),
		filter: make([]uint64, 1<<filterBits/64), long: map[string]int32{}}
	mid := 0
	for tok := range ranks {
		if len(tok) > 8 && len(tok) <= 16 {
			mid++
		}
	}
	midSize := 1 << bits.Len(uint(mid*4/3))
	t.mid, t.midShift = make([]midSlot, midSize), uint(64-bits.Len(uint(midSize-1)))
	// Inserted in rank order, not the map's random order: the table is the
	// same in every process (so are its probe lengths, and what a benchmark
	// measures), and the most frequent tokens, which BPE ranks first, sit
	// in their home slots.
	for _, e := range inRankOrder(ranks) {
		tok, r := e.tok, e.rank
		if len(tok) > 16 {
			t.long[strings.Clone(tok)] = int32(r)
		}
		if len(tok) > 8 && len(tok) <= 16 {
			lo, hi := pack(tok[:8]), pack(tok[8:])
			h := midHash(lo, hi, len(tok))
			a, b := filterPos(h)
			t.filter[a/64] |= 1 << (a % 64)
			t.filter[b/64] |= 1 << (b % 64)
			for i := int(h >> t.midShift); ; i = (i + 1) & (len(t.mid) - 1) {
				if t.mid[i].n == 0 {
					t.mid[i] = midSlot{lo: lo, hi: hi, rank: int32(r), n: uint8(len(tok))}
					break
				}
			}
		}
		if len(tok) < 1 || len(tok) > 8 {
			continue
		}
		k := pack(tok)
		h := hashKey(k, len(tok))
		a, b := filterPos(h)
		t.filter[a/64] |= 1 << (a % 64)
		t.filter[b/64] |= 1 << (b % 64)
		for i := int(h >> t.shift); ; i = (i + 1) & (len(t.slots) - 1) {
			if t.slots[i].n == 0 {
				t.slots[i] = rankSlot{key: k, rank: int32(r), n: uint8(len(tok))}
				break
			}
		}
	}
	return t
}

// pack is s (1 to 8 bytes) as a little-endian integer.
func pack(s string) uint64 {
	var k uint64
	for i := len(s) - 1; i >= 0; i-- {
		k = k<<8 | uint64(s[i])
	}
	return k
}

// loadLE32 is the first 4 bytes of s (at least 4) as a little-endian
// integer, in one load.
func loadLE32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// hashKey mixes the key k of n bytes: its top bits pick the home slot,
// its low bits the filter's.
func hashKey(k uint64, n int) uint64 {
	h := (k ^ uint64(n)<<59) * 0x9e3779b97f4a7c15
	h ^= h >> 29
	return h * 0xbf58476d1ce4e5b9
}

// filterPos are the two filter bits of hash h.
func filterPos(h uint64) (uint64, uint64) {
	const mask = 1<<filterBits - 1
	return h & mask, (h >> filterBits) & mask
}

// get returns the rank of the token s, ok false when s is not a token.
func (t *rankTable) get(s string) (int, bool) {
	if len(s) > 8 {
		if len(s) > 16 {
			r, ok := t.long[s]
			return int(r), ok
		}
		return t.getMid(s)
	}
	if len(s) == 0 {
		return 0, false
	}
	// pack(s); from 4 bytes in two loads, where pack reads byte by byte
	// (about 30 instructions of a 6-byte string, and the merge packs
	// every string it looks up): the words of s's first and last four
	// bytes, the second shifted up to its place (where they overlap they
	// hold the same bytes). TestRankTable.
	var k uint64
	if n := len(s); n >= 4 {
		k = uint64(loadLE32(s)) | uint64(loadLE32(s[n-4:]))<<((8*(n-4))&63)
	} else {
		k = pack(s)
	}
	h := hashKey(k, len(s))
	if a, b := filterPos(h); t.filter[a/64]&(1<<(a%64)) == 0 || t.filter[b/64]&(1<<(b%64)) == 0 {
		return 0, false
	}
	for i := int(h >> t.shift); ; i = (i + 1) & (len(t.slots) - 1) {
		sl := &t.slots[i]
		if sl.n == 0 {
			return 0, false
		}
		if sl.key == k && int(sl.n) == len(s) {
			return int(sl.rank), true
		}
	}
}

// rankOf is the rank of the token p[i:e] (2 ≤ e−i), or -1 when it is not
// one: get for heapMerge, which looks up pairs of parts of its piece. A
// string of up to 8 bytes is keyed from at most two 4-byte loads, or its
// two or three bytes (get packs those byte by byte, and a merge of CJK
// text looks up many), and one that the filter turns away, most of those
// that are not tokens, costs no probe. TestRankOfSameAsGet.
func (t *rankTable) rankOf(p string, i, e int) int32 {
	n := e - i
	if n > 8 {
		if r, ok := t.get(p[i:e]); ok {
			return int32(r)
		}
		return -1
	}
	var k uint64
	if n >= 4 {
		k = uint64(loadLE32(p[i:])) | uint64(loadLE32(p[e-4:]))<<((8*(n-4))&63)
	} else {
		k = uint64(p[i]) | uint64(p[i+1])<<8
		if n == 3 {
			k |= uint64(p[i+2]) << 16
		}
	}
	h := hashKey(k, n)
	if a, b := filterPos(h); t.filter[a/64]&(1<<(a%64)) == 0 || t.filter[b/64]&(1<<(b%64)) == 0 {
		return -1
	}
	for j := int(h >> t.shift); ; j = (j + 1) & (len(t.slots) - 1) {
		sl := &t.slots[j]
		if sl.n == 0 {
			return -1
		}
		if sl.key == k && int(sl.n) == n {
			return sl.rank
		}
	}
}

// lookup is get of the string of n bytes (1 to 16) with key lo, hi
// (pieceKey's) and hash h (hashKey(lo, n) for n ≤ 8, else
// midHash(lo, hi, n)), without packing or hashing it again.
func (t *rankTable) lookup(lo, hi uint64, n int, h uint64) (int, bool) {
	if a, b := filterPos(h); t.filter[a/64]&(1<<(a%64)) == 0 || t.filter[b/64]&(1<<(b%64)) == 0 {
		return 0, false
	}
	if n <= 8 {
		for i := int(h >> t.shift); ; i = (i + 1) & (len(t.slots) - 1) {
			sl := &t.slots[i]
			if sl.n == 0 {
				return 0, false
			}
			if sl.key == lo && int(sl.n) == n {
				return int(sl.rank), true
			}
		}
	}
	for i := int(h >> t.midShift); ; i = (i + 1) & (len(t.mid) - 1) {
		sl := &t.mid[i]
		if sl.n == 0 {
			return 0, false
		}
		if sl.lo == lo && sl.hi == hi && int(sl.n) == n {
			return int(sl.rank), true
		}
	}
}

// getMid is get for a string of 9 to 16 bytes.
func (t *rankTable) getMid(s string) (int, bool) {
	// pack(s[:8]), pack(s[8:]) in two loads: the second the word ending
	// at s's end, shifted down to its bytes past the eighth.
	lo, hi := le64(s[:8]), le64(s[len(s)-8:])>>((128-8*len(s))&63)
	h := midHash(lo, hi, len(s))
	if a, b := filterPos(h); t.filter[a/64]&(1<<(a%64)) == 0 || t.filter[b/64]&(1<<(b%64)) == 0 {
		return 0, false
	}
	for i := int(h >> t.midShift); ; i = (i + 1) & (len(t.mid) - 1) {
		sl := &t.mid[i]
		if sl.n == 0 {
			return 0, false
		}
		if sl.lo == lo && sl.hi == hi && int(sl.n) == len(s) {
			return int(sl.rank), true
		}
	}
}

// ranked is a token and its rank.
type ranked struct {
	tok  string
	rank int
}

// inRankOrder lists ranks' tokens by rank (then bytes): placed by rank in
// one pass when the ranks are distinct and dense, as in every tiktoken
// vocabulary (sorting 200,000 tokens instead added about 80 ms to
// start-up), sorted otherwise.
func inRankOrder(ranks map[string]int) []ranked {
	maxRank := -1
	for _, r := range ranks {
		maxRank = max(maxRank, r)
	}
	if maxRank < 2*len(ranks) {
		slots := make([]ranked, maxRank+1)
		distinct := true
		for tok, r := range ranks {
			if r < 0 || tok == "" || slots[r].tok != "" {
				distinct = false
				break
			}
			slots[r] = ranked{tok, r}
		}
		if distinct {
			out := slots[:0]
			for _, e := range slots {
				if e.tok != "" {
					out = append(out, e)
				}
			}
			return out
		}
	}
	out := make([]ranked, 0, len(ranks))
	for tok, r := range ranks {
		out = append(out, ranked{tok, r})
	}
	slices.SortFunc(out, func(a, b ranked) int { return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.tok, b.tok)) })
	return out
}
