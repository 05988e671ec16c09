package weigher

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// mergePieces are pieces of 2 to shortPiece bytes for mergeTokens' tests:
// English words and identifiers, hexadecimal nonces' letter runs, runs of
// one or two bytes (which merge most), random bytes of small alphabets,
// CJK and emoji (whose bytes merge across runes), tokens joined, random
// bytes.
func mergePieces(r *rand.Rand, c *bpeCounter, n int) []string {
	words := strings.Fields(`throttled limitWriter quotaBudget workerReader chunkCost completion deadline
		_configuration implementation ConcurrentHashMap aaaaaaaa deadbeef cbcfed abcdef`)
	alphabets := []string{"a", "ab", "abcdef", "abcdefghijklmnopqrstuvwxyz", " \n", "=-_", "速率限制器在每个日历周期", "😀👍🏽🚀🔥", "\x00\xff\x80 a", "é中a\n", "ой!ЙЁ"}
	var toks []string
	for tok := range c.ranks.long {
		toks = append(toks, tok)
		if len(toks) == 64 {
			break
		}
	}
	toks = append(toks, " the", "ing", "er", "tion", "Count", "_id", "中", "ation", "ed")
	var out []string
	for i := range n {
		size := 2 + r.IntN(shortPiece-1)
		var b strings.Builder
		switch i % 5 {
		case 0:
			for b.Len() < size {
				b.WriteString(words[r.IntN(len(words))])
			}
		case 1, 2:
			alpha := alphabets[r.IntN(len(alphabets))]
			for b.Len() < size {
				b.WriteByte(alpha[r.IntN(len(alpha))])
			}
		case 3:
			for b.Len() < size {
				b.WriteString(toks[r.IntN(len(toks))])
			}
		default:
			for b.Len() < size {
				b.WriteByte(byte(r.Uint32()))
			}
		}
		s := b.String()
		if len(s) > shortPiece {
			s = s[:shortPiece]
		}
		out = append(out, s)
	}
	return out
}

// TestMergeTokensSameAsScan: mergeTokens counts what tiktoken's merge
// (scanMerge, the oracle: parts of {start, rank}, get for every pair)
// counts, for both vocabularies, on pieces of every length from 2 to
// shortPiece bytes.
func TestMergeTokensSameAsScan(t *testing.T) {
	w := testWeigher(t)
	r := rand.New(rand.NewPCG(29, 30))
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		c := w.encoders[enc].(*bpeCounter)
		for _, p := range mergePieces(r, c, 6000) {
			if got, want := c.mergeTokens(p), scanMerge(c, p); got != want {
				t.Fatalf("%s: mergeTokens(%q) = %d, the scan merge says %d", enc, p, got, want)
			}
		}
	}
}

// FuzzMergeTokensSameAsScan holds mergeTokens to scanMerge on any piece
// of 2 to shortPiece bytes.
func FuzzMergeTokensSameAsScan(f *testing.F) {
	w := testWeigher(f)
	for _, s := range mergePieces(rand.New(rand.NewPCG(31, 32)), w.encoders[EncodingO200k].(*bpeCounter), 30) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if len(p) < 2 || len(p) > shortPiece {
			return
		}
		for _, enc := range []string{EncodingO200k, EncodingCL100k} {
			c := w.encoders[enc].(*bpeCounter)
			if got, want := c.mergeTokens(p), scanMerge(c, p); got != want {
				t.Fatalf("%s: mergeTokens(%q) = %d, the scan merge says %d", enc, p, got, want)
			}
		}
	})
}
