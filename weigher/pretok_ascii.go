package weigher

import "unicode/utf8"

// The pre-tokenizer's ASCII fast path. Most pieces of prose, code and JSON
// are ASCII from start to end, and so is the byte that ends them: for those
// the split patterns reduce to byte classes, which asciiPieceO200k and
// asciiPieceCL100k match in tight loops over one table instead of the
// general matcher's rune-by-rune flags and tries of each alternative. They
// give up (return -1) as soon as a decision would depend on a byte that is
// not ASCII — a letter run that goes on into "é", digits that may go on
// into "٣", spaces into U+00A0 — and nextPiece then runs the general matcher
// (generalPiece) from the piece's start. FuzzASCIIPiece checks that the two
// agree on every piece of any text. countPieces (bpe.go) writes out its
// word, digit and punctuation cases for o200k_base, where the calls cost
// more than the matching; FuzzInlinePiecesSameAsPlain checks those.
//
// Measured with the piece memo's word-load keys (memo.go), in instructions
// per count of BenchmarkCold's 16 KB texts (o200k_base; callgrind, the
// counter's own functions, (N=120 − N=20)/100), before → after: prose
// 1.33 M → 0.88 M, code 1.88 M → 1.11 M, JSON 2.47 M → 1.30 M, prose with
// emoji and accents 1.67 M → 1.58 M; CJK 6.78 M → 6.94 M (its pieces start
// with runes that are not ASCII, and its time is the merge: heapMerge and
// get; the same code moved by ±3% between builds that differ elsewhere).

// Byte classes of the fast path: each ASCII byte has exactly one, from
// asciiFlags; every byte from 0x80 up is bHigh (not ASCII: defer).
const (
	bUpper   uint8 = 1 << iota // A-Z: \p{Lu}
	bLower                     // a-z: \p{Ll}
	bDigit                     // 0-9: \p{N}
	bSpace                     // \t \v \f and ' ': \s but not [\r\n]
	bNewline                   // \r \n
	bOther                     // the rest of ASCII: [^\s\p{L}\p{N}]
	bHigh                      // a byte of a rune that is not ASCII

	bLetter = bUpper | bLower
)

// byteClass is the fast path's class of each byte value.
var byteClass = func() (t [256]uint8) {
	for b := range t {
		if b >= utf8.RuneSelf {
			t[b] = bHigh
			continue
		}
		switch f := asciiFlags[b]; {
		case f&fLetter != 0 && f&fUpper != 0:
			t[b] = bUpper
		case f&fLetter != 0:
			t[b] = bLower
		case f&fNumber != 0:
			t[b] = bDigit
		case f&fNewline != 0:
			t[b] = bNewline
		case f&fSpace != 0:
			t[b] = bSpace
		default:
			t[b] = bOther
		}
	}
	return t
}()

// classRun returns the end of the run of bytes from i whose class is in
// mask, and whether the byte that ends it is ASCII (or the text ends): when
// it is not, the run may go on in the general matcher's terms.
func classRun(s string, i int, mask uint8) (int, bool) {
	for i < len(s) {
		k := byteClass[s[i]]
		if k&mask == 0 {
			return i, k != bHigh
		}
		i++
	}
	return i, true
}

// asciiPieceO200k is the end of o200k_base's piece at s[i] (s[i] ASCII), or
// -1 when the general matcher must decide.
func asciiPieceO200k(s string, i int) int {
	k := byteClass[s[i]]
	j := i // where the letters start; -1: none
	if k&bLetter == 0 {
		j = -1
		if k != bDigit && k != bNewline && i+1 < len(s) {
			// '[^\r\n\p{L}\p{N}]?' then the letters
			switch k1 := byteClass[s[i+1]]; {
			case k1 == bHigh:
				return -1
			case k1&bLetter != 0:
				j = i + 1
			}
		}
	}
	if j >= 0 {
		// o200k's letter alternatives from the letter at s[j]: in ASCII,
		// '[U]*[L]+' and '[U]+[L]*' are both a run of capitals then a
		// run of small letters, then an optional contraction. Written
		// here, not called: most pieces are words, and the call cost
		// each about 10 instructions.
		a, ok := classRun(s, j, bUpper)
		if !ok {
			return -1
		}
		e, ok := classRun(s, a, bLower)
		if !ok {
			return -1
		}
		return withContraction(s, e)
	}
	if k == bDigit {
		return asciiDigits(s, i)
	}
	return asciiPunctOrSpace(s, i, k, '/')
}

// asciiPieceCL100k is the end of cl100k_base's piece at s[i] (s[i] ASCII),
// or -1 when the general matcher must decide.
func asciiPieceCL100k(s string, i int) int {
	if l := contraction(s, i); l > 0 {
		return i + l
	}
	k := byteClass[s[i]]
	j := i // where '\p{L}+' starts
	if k&bLetter == 0 {
		if k == bDigit || k == bNewline || i+1 >= len(s) {
			j = -1
		} else if k1 := byteClass[s[i+1]]; k1 == bHigh {
			return -1
		} else if k1&bLetter == 0 {
			j = -1
		} else {
			j = i + 1
		}
	}
	if j >= 0 {
		e, ok := classRun(s, j, bLetter)
		if !ok {
			return -1
		}
		return e
	}
	if k == bDigit {
		return asciiDigits(s, i)
	}
	return asciiPunctOrSpace(s, i, k, '\n')
}

// asciiDigits matches '\p{N}{1,3}' at the digit s[i].
func asciiDigits(s string, i int) int {
	j := i + 1
	for j < len(s) && j < i+3 {
		k := byteClass[s[j]]
		if k == bHigh {
			return -1 // may be a digit of another script
		}
		if k != bDigit {
			break
		}
		j++
	}
	return j
}

// asciiPunctOrSpace matches, at s[i] of class k (neither letter nor
// digit), ' ?[^\s\p{L}\p{N}]+[\r\n]*' (o200k: '[\r\n/]*'; slash is '/' for
// o200k, else '\n', already in the set), then the whitespace alternatives.
func asciiPunctOrSpace(s string, i int, k uint8, slash byte) int {
	start := -1
	if k == bOther {
		start = i
	} else if s[i] == ' ' && i+1 < len(s) {
		switch byteClass[s[i+1]] {
		case bOther:
			start = i + 1
		case bHigh:
			return -1
		}
	}
	if start >= 0 {
		j, ok := classRun(s, start, bOther)
		if !ok {
			return -1
		}
		for j < len(s) && (s[j] == '\r' || s[j] == '\n' || s[j] == slash) {
			j++
		}
		return j
	}
	// whitespace: '\s*[\r\n]+', '\s+(?!\S)', '\s+'
	j, ok := classRun(s, i, bSpace|bNewline)
	if !ok {
		return -1
	}
	for m := j - 1; m >= i; m-- {
		if s[m] == '\r' || s[m] == '\n' {
			return m + 1
		}
	}
	if j < len(s) && j-1 > i {
		return j - 1
	}
	return j
}

// notLower flags (0x80) the bytes of w (eight bytes of text, the first in
// the low byte) that are not a small ASCII letter (a-z, bLower): exactly
// those, so the lowest flagged byte ends a run of small letters, and none
// is flagged when all eight are letters. With bit 7 of each byte cleared,
// adding 0x1f sets it exactly in the bytes from 'a' (0x61) up and adding
// 0x05 exactly in those from '{' (0x7b) up, with no carry into the next
// byte (0x7f+0x1f < 0x100); a byte with bit 7 set (not ASCII) is flagged
// by w itself. The word loop of countPiecesIn's letter runs, which took
// about five instructions a byte one byte at a time
// (TestNotLowerEveryByte, FuzzInlinePiecesSameAsPlain).
func notLower(w uint64) uint64 {
	const ones, msb = 0x0101010101010101, 0x8080808080808080
	low := w &^ msb
	return (^(low + ones*(0x80-'a')) | (low + ones*(0x80-'z'-1)) | w) & msb
}
