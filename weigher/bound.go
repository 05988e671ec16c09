package weigher

import (
	"math"
	"unicode/utf8"
)

// The upper bound. bound counts what count counts, for a fraction of the
// work: the same pre-tokenizer pieces, but no byte-pair merge. A piece that
// is one token (the rank table says so) is 1; any other piece gets
// pairBound, the most parts a merge could possibly leave. It is never below
// count (TestBoundNeverBelowExact, FuzzBound) because of how tiktoken's merge
// ends: it stops only when no two adjacent parts join into a token, so in
// its final split no two adjacent one-byte parts form a two-byte token, and
// every two-byte part is a token; pairBound is the largest number of parts
// any split obeying those two rules can have (a relaxation: longer parts
// are allowed whatever they are), so the merge's count is never above it.
//
// Measured bound / exact (TestBoundRatio: 2 MiB of each text kind of
// cold_bench_test.go, 10 MiB in all, checked per 4 KiB slice, never below
// 1): o200k_base — English prose 1.02 (slices 1.00–1.08), Go/Python code
// 1.08 (1.04–1.13), JSON 1.03 (1.02–1.15), CJK 1.99 (1.97–2.00), prose
// with emoji and accented words 1.44 (1.38–1.51); cl100k_base — prose
// 1.03, code 1.36, JSON 1.01, CJK 1.29, emoji 1.38. Worst 4 KiB slice
// 2.00 (CJK, o200k_base). On random bytes it can reach the byte count,
// the bound every byte-level BPE obeys. Speed (BenchmarkBound, same run):
// CJK ~14× the exact count, prose and emoji ~1.7×, JSON ~1.4×, code ~1×
// (its pieces are short tokens already: the pre-tokenizer is the cost).

// bound returns an upper bound of c.count(text). Invalid UTF-8 is bounded
// as count counts it, one U+FFFD per bad byte.
func (c *bpeCounter) bound(text string) int64 {
	if !utf8.ValidString(text) {
		text = validText(text)
	}
	return c.boundFrom(text, 0)
}

// boundFrom bounds the pieces of valid UTF-8 text from byte i, a piece
// boundary, to its end.
func (c *bpeCounter) boundFrom(text string, i int) int64 {
	var n int64
	for i < len(text) {
		j := c.nextPiece(text, i)
		n += c.pieceBound(text[i:j])
		i = j
	}
	return n
}

// pieceBound is an upper bound of pieceTokens(p).
func (c *bpeCounter) pieceBound(p string) int64 {
	if len(p) <= 1 {
		return int64(len(p))
	}
	if len(p) > maxPieceBytes { // as pieceTokens merges it
		return segmented(p, c.pieceBound)
	}
	if _, ok := c.ranks.get(p); ok {
		return 1
	}
	return c.pairBound(p)
}

// isPair reports whether the bytes a, b form a two-byte token.
func (c *bpeCounter) isPair(a, b byte) bool {
	k := int(a)<<8 | int(b)
	return c.pairBits[k/64]&(1<<(k%64)) != 0
}

// pairBound is the most parts p (2 bytes or more) can be split into such
// that no two adjacent one-byte parts form a two-byte token and every
// two-byte part is a token (parts of three bytes or more are unrestricted):
// a dynamic program over the bytes, in one pass. At byte i, a is the best
// split of p[:i] ending with a one-byte part, ns the best ending with a
// longer part (or the empty split), best1..best3 the best of p[:i-1],
// p[:i-2], p[:i-3], top3 the best of any prefix up to p[:i-3].
func (c *bpeCounter) pairBound(p string) int64 {
	const none = math.MinInt32 // no such split
	a, ns := none, 0
	best1, best2, best3, top3 := 0, none, none, none
	for i := 1; i <= len(p); i++ {
		pair := i >= 2 && c.isPair(p[i-2], p[i-1])
		prev := ns // a one-byte part after a longer part
		if !pair {
			prev = max(prev, a) // or after a one-byte part it does not pair with
		}
		na := prev + 1
		nns := none
		if pair {
			nns = best2 + 1 // a two-byte part
		}
		if i >= 3 {
			top3 = max(top3, best3)
			nns = max(nns, top3+1) // a part of three bytes or more
		}
		a, ns = na, nns
		best3, best2, best1 = best2, best1, max(na, nns)
	}
	return int64(best1)
}

// byteBound is an upper bound of any byte-level BPE count of text (the
// legacy encodings counted by tiktoken-go): one token per byte at most,
// an invalid byte counting as the three of U+FFFD.
func byteBound(text string) int64 {
	n := int64(len(text))
	if utf8.ValidString(text) {
		return n
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size == 1 {
			n += 2
		}
		i += size
	}
	return n
}
