package weigher

import (
	"math/rand/v2"
	"testing"
)

// checkPieces splits s with nextPiece (the ASCII fast path first) and, at
// every piece start and at every byte, compares the piece's end with the
// general matcher's, for both encodings.
func checkPieces(t *testing.T, w *Weigher, s string) {
	t.Helper()
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		c := w.encoders[enc].(*bpeCounter)
		for i := range len(s) {
			if got, want := c.nextPiece(s, i), c.generalPiece(s, i); got != want {
				t.Fatalf("%s: piece of %q at %d ends at %d (%q), the general matcher says %d (%q)",
					enc, s, i, got, s[i:got], want, s[i:want])
			}
		}
	}
}

// asciiPieceSeeds are texts whose pieces end right where ASCII meets a
// rune that is not ASCII of every class the patterns tell apart.
var asciiPieceSeeds = []string{
	"Hello, world! It's 2024; we're   here.\n\n  Indented\tcode();\r\n", "I'M SHOUTING DON'T", "HTTPServer xmlHTTP",
	"café naïve", "CAFÉ", "abcǅ", "ABCʰ", "e\u0301", "A\u0301b", "x中", " 中", "\t中", "\"é", "12٣", "1٣", "123٣",
	"  \u00a0x", " \u00a0", "\n\u3000", "a  \u0085", "!!—", "! —", "..→x", "'s", "'ſ", "'S", "'ll", "'LL", "don'T",
	"path/to//file\r\n/", "//\n", " //x", "x\r\n\r\n", "   x", "  1", " !x", "a1b", "\x00\x1bA", "\xffa", "a\xff",
}

func TestASCIIPieceMatchesGeneral(t *testing.T) {
	w := testWeigher(t)
	for _, s := range asciiPieceSeeds {
		checkPieces(t, w, s)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		checkPieces(t, w, randomText(r, 1+r.IntN(12)))
	}
	for _, k := range textKinds {
		checkPieces(t, w, kindText(k.name, 4<<10))
	}
}

// FuzzASCIIPiece: the ASCII fast path and the general matcher end every
// piece at the same byte, for any text (nextPiece sees valid UTF-8 only,
// as count converts it first; the fuzzer's strings are converted alike).
func FuzzASCIIPiece(f *testing.F) {
	for _, s := range asciiPieceSeeds {
		f.Add(s)
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, s string) {
		checkPieces(t, w, string([]rune(s)))
	})
}

// TestNotLowerEveryByte: notLower flags a byte of a word exactly when
// byteClass says it is not bLower, for every byte value at every place in
// the word and in random words (no byte's flag leaks into another's).
func TestNotLowerEveryByte(t *testing.T) {
	want := func(w uint64) (m uint64) {
		for k := range 8 {
			if byteClass[byte(w>>(8*k))] != bLower {
				m |= 0x80 << (8 * k)
			}
		}
		return m
	}
	for k := range 8 {
		for v := range 256 {
			for _, fill := range []byte{'a', 'z', 'A', 0xff, 0x7b, 0x60} {
				w := uint64(fill) * 0x0101010101010101
				w = w&^(0xff<<(8*k)) | uint64(v)<<(8*k)
				if got := notLower(w); got != want(w) {
					t.Fatalf("notLower(%#016x) = %#016x, want %#016x", w, got, want(w))
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		w := r.Uint64()
		if got := notLower(w); got != want(w) {
			t.Fatalf("notLower(%#016x) = %#016x, want %#016x", w, got, want(w))
		}
	}
}
