package weigher

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// plainCounters are the fast counters of both encodings and, for each, the
// same counter without the piece memo: countPieces' plain loop, whose
// pieces come from nextPiece (FuzzASCIIPiece checks it against the general
// matcher) and whose tokens from pieceTokens.
func plainCounters(tb testing.TB) (fast, plain []*bpeCounter) {
	for _, c := range shortTextCounters(tb) {
		fast = append(fast, c)
		plain = append(plain, &bpeCounter{ranks: c.ranks, o200k: c.o200k, pairs: c.pairs, pairBits: c.pairBits, cross: c.cross, noMemo: true})
	}
	return fast, plain
}

// inlinePieceSeeds end pieces where countPieces' own matching of o200k's
// ASCII words, digits and punctuation (and its 1-, 2- and 3-to-16-byte
// token counts, keyed from either end of the text) must agree with
// asciiPieceO200k and memoTokens: punctuation runs into newlines and
// slashes, digits into digits of other scripts, words into marks and
// contractions, pieces of every length at a text's end.
var inlinePieceSeeds = []string{
	"}\n\n// next", "x;\r\n/", "a.\n/b", ")/\n", "--\r\r\n//", "!!—", ".\u0085", "!\xff", "1٣", "12٣", "123٣", "1234٣", "1٣٣٣٣", "12٣٣٣", "00২২٣",
	"9\xff", "007", "0000000", "x12y", "it's", "IT'S", "don'T", "a'll'", "'", "abcé", "ABCé", "Ab\u0301", " é", ".é",
	" \"quoted\"", "\t(x)", "  a", "a  ", "\n\nA", "\"a", "a", "ab", "abc", "abcdefgh", "abcdefghi", "abcdefghijklmnop",
	"abcdefghijklmnopq", " abcdefghijklmnop", "https://example.com/a/b?c=d&e=f", `{"k": [1, 2.5e10, "v\\n"]}`,
	// a whitespace byte before punctuation or a digit (perf29's cases)
	` {"id": 42}`, "\t}\n", "x = 42 ٣", " 4٣", "x := y", " \"é", " ,\u00a0", "\t\"x", "\v1", "\f!", " ::\r\n/x", " !\xff", " (\xe2\x82", "\t\t}",
}

// checkInlinePieces fails when a fast counter's count of s differs from
// its plain twin's.
func checkInlinePieces(t *testing.T, fast, plain []*bpeCounter, s string) {
	t.Helper()
	for k, c := range fast {
		if got, want := c.count(s), plain[k].count(s); got != want {
			t.Fatalf("o200k %v: count(%q) = %d, the plain loop says %d", c.o200k, s, got, want)
		}
	}
}

// TestInlinePiecesSameAsPlain: countPieces' written-out pre-tokenizer and
// token counts give the plain loop's count, on the seeds, on every suffix
// of each (a piece at the text's end keys from its end), on random texts
// of the pre-tokenizer's alphabet and on every kind of corpus text.
func TestInlinePiecesSameAsPlain(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	fast, plain := plainCounters(t)
	for _, s := range append(inlinePieceSeeds, shortTextCases...) {
		for i := range len(s) {
			checkInlinePieces(t, fast, plain, s[i:])
			checkInlinePieces(t, fast, plain, "padding to reach sixteen bytes "+s[i:])
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		checkInlinePieces(t, fast, plain, randomText(r, 1+r.IntN(24)))
	}
	for _, k := range textKinds {
		checkInlinePieces(t, fast, plain, kindText(k.name, 16<<10))
	}
	checkInlinePieces(t, fast, plain, strings.Repeat("12٣ab'S}\n/", 100))
	// Pieces at a text's end that differ in one byte only, one after the
	// other: a key that lost a byte answers for the other piece from the
	// memo.
	for _, w := range []string{"cat", "token", "limits", "Hello", "ing", "12", "123", "!!", "...", "abcdefghijklm"} {
		for _, p := range []string{" ", ".", "(", "\"", "_", "x", "1", "!", "\t"} {
			checkInlinePieces(t, fast, plain, p+w)
			checkInlinePieces(t, fast, plain, w+p)
			checkInlinePieces(t, fast, plain, "ab "+p+w)
		}
	}
}

// FuzzInlinePiecesSameAsPlain: the same for any text.
func FuzzInlinePiecesSameAsPlain(f *testing.F) {
	for _, s := range inlinePieceSeeds {
		f.Add(s)
	}
	fast, plain := plainCounters(f)
	f.Fuzz(func(t *testing.T, s string) {
		checkInlinePieces(t, fast, plain, s)
	})
}

// TestAtRuneSameAsDecode: atRune's own decoding of two- and three-byte
// sequences gives utf8.DecodeRuneInString's rune flags and size for every
// lead byte that is not ASCII followed by every one or two bytes (the
// text ending after one, two or three bytes, or going on), overlong forms
// and surrogates included.
func TestAtRuneSameAsDecode(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	want := func(s string) (uint8, int) {
		r, n := utf8.DecodeRuneInString(s)
		return flagsOf(r), n
	}
	var b [4]byte
	for c0 := 0x80; c0 < 0x100; c0++ {
		for c1 := range 0x100 {
			for c2 := range 0x100 {
				b[0], b[1], b[2], b[3] = byte(c0), byte(c1), byte(c2), 'x'
				for _, s := range []string{string(b[:1]), string(b[:2]), string(b[:3]), string(b[:4])} {
					if c2 > 0 && len(s) < 3 {
						continue // shorter texts do not depend on c2
					}
					gf, gn := atRune(s, 0)
					if wf, wn := want(s); gf != wf || gn != wn {
						t.Fatalf("atRune(%q) = %#x, %d; DecodeRuneInString's flags %#x, %d", s, gf, gn, wf, wn)
					}
				}
			}
		}
	}
	for _, s := range []string{"😀", "👍🏽", "\xf0\x9f\x98", "\xf4\x90\x80\x80", "a中", "x\xe4\xb8\xad"} {
		for i := range len(s) {
			if s[i] < utf8.RuneSelf {
				continue
			}
			gf, gn := atRune(s, i)
			if wf, wn := want(s[i:]); gf != wf || gn != wn {
				t.Fatalf("atRune(%q, %d) = %#x, %d; DecodeRuneInString's flags %#x, %d", s, i, gf, gn, wf, wn)
			}
		}
	}
}

// TestPiecesUncheckedSameAsPlain: countPieces of text that is not valid
// UTF-8, with and without its check, and stopped at every byte, gives
// the plain loop's tokens, end and ok: checked, both stop at the first
// piece of the general matcher that is not valid UTF-8; unchecked, the
// fast loop (memoPieces stops there) counts that piece and goes on, as
// the plain loop does.
func TestPiecesUncheckedSameAsPlain(t *testing.T) {
	fast, plain := plainCounters(t)
	texts := []string{"!\xff", "9\xff", "ab\xffcd ef", "word \xe2\x82 and more words\xff\xfe, then 123 and \xc3(",
		strings.Repeat("padding to reach sixteen bytes \xff", 3)}
	r := rand.New(rand.NewPCG(7, 8))
	for range 300 {
		b := []byte(randomText(r, 1+r.IntN(40)))
		b[r.IntN(len(b))] = byte(0x80 + r.IntN(0x80))
		texts = append(texts, string(b))
	}
	for _, s := range texts {
		for k, c := range fast {
			for stop := 1; stop <= len(s); stop++ {
				for _, check := range []bool{true, false} {
					n, end, ok := c.countPieces(s, 0, stop, check)
					pn, pend, pok := plain[k].countPieces(s, 0, stop, check)
					if n != pn || end != pend || ok != pok {
						t.Fatalf("o200k %v: countPieces(%q, 0, %d, %v) = %d, %d, %v; the plain loop says %d, %d, %v",
							c.o200k, s, stop, check, n, end, ok, pn, pend, pok)
					}
				}
			}
		}
	}
}
