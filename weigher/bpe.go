package weigher

import (
	"github.com/tidwall/gjson"
	"math"
	"math/bits"
	"sync"
	"unicode"
	"unicode/utf8"
)

// bpeCounter counts tokens of o200k_base and cl100k_base text without
// building token lists: a hand-written pre-tokenizer equivalent to the two
// encodings' split patterns (tiktoken-go's encoding.go, from OpenAI's
// tiktoken_ext/openai_public.py), then tiktoken's byte-pair merge on each
// piece, counting parts instead of emitting ranks. tiktoken-go runs those
// patterns through the backtracking regexp2 engine and allocates per piece,
// which made counting ~10× slower; TestBPECounterMatchesTiktoken and
// FuzzBPECounter check both give the same counts.
//
// It is immutable and safe for concurrent use.
type bpeCounter struct {
	ranks *rankTable // byte sequence → rank, from the embedded vocabulary
	o200k bool       // o200k_base split rules; else cl100k_base
	// pairs is the rank of each two-byte token (first byte × 256 + second),
	// -1 when there is none: the first round of every merge reads it
	// instead of the map.
	pairs *[1 << 16]int32
	// pairBits has bit a×256+b set when the bytes a, b form a token: the
	// pairs table in 8 KiB, for the upper bound (bound.go).
	pairBits *[1 << 16 / 64]uint64
	// cross is a filter of the vocabulary's four-byte strings: the bit
	// (crossBit) of every four bytes that some token holds in a row is set
	// (a few other bits too: it is hashed). A clear bit means no token
	// holds them; cutMerge cuts long pieces with it. Nil: no cuts.
	cross *[1 << crossBits / 64]uint64
	// memos are this counter's piece memos (*memoCounter, each holding
	// one), one per counting goroutine at a time.
	memos sync.Pool
	// noMemo counts without the memo (benchmarks compare the two).
	noMemo bool
	// roles are the counts of chatRoles, by index, counted once when the
	// counter is built (all 0 in a counter built otherwise: roleTokens
	// then counts).
	roles [len(chatRoles)]int64
}

// chatRoles are the roles of chat messages (OpenAI's chat API): a role
// is counted on every message, and these are nearly all of them.
var chatRoles = [...]string{"user", "assistant", "system", "tool", "developer"}

// roleTokens is countValue(enc, v) for a message's role: a role of
// chatRoles written plain is the count its counter made of it when it was
// built (some 400 instructions a message less than counting it again:
// TestRoleTokensSameAsCounted); any other value is counted (a string by
// its text, another value by its JSON text).
func roleTokens(enc counter, v gjson.Result) int64 {
	if mc, ok := enc.(*memoCounter); ok && mc.bpe.roles[0] > 0 && len(v.Raw) > 2 && v.Type == gjson.String {
		for i, r := range chatRoles {
			if len(v.Raw) == len(r)+2 && v.Raw[1:len(v.Raw)-1] == r {
				return mc.bpe.roles[i]
			}
		}
	}
	return countValue(enc, v)
}

// newBPECounter builds the counter of a vocabulary.
func newBPECounter(ranks map[string]int, o200k bool) *bpeCounter {
	c := &bpeCounter{ranks: newRankTable(ranks), o200k: o200k, pairs: new([1 << 16]int32), pairBits: new([1 << 16 / 64]uint64)}
	for i := range c.pairs {
		c.pairs[i] = -1
	}
	c.cross = new([1 << crossBits / 64]uint64)
	for tok, r := range ranks {
		if len(tok) == 2 {
			k := int(tok[0])<<8 | int(tok[1])
			c.pairs[k] = int32(r)
			c.pairBits[k/64] |= 1 << (k % 64)
		}
		for i := 0; i+4 <= len(tok); i++ {
			b := crossBit(tok[i:])
			c.cross[b/64] |= 1 << (b % 64)
		}
	}
	for i, r := range chatRoles {
		c.roles[i] = c.count(r)
	}
	return c
}

// pairRank is the rank of the two bytes p[i:i+2], or -1.
func (c *bpeCounter) pairRank(p string, i int) int {
	return int(c.pairs[int(p[i])<<8|int(p[i+1])])
}

// Character flags for the split patterns. \s is unicode.IsSpace, \p{…} are
// the unicode package's categories, as in regexp2.
const (
	fLetter  uint8 = 1 << iota // \p{L}
	fNumber                    // \p{N}
	fSpace                     // \s
	fUpper                     // o200k [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	fLower                     // o200k [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	fNewline                   // [\r\n]
)

var asciiFlags = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = runeFlagsSlow(r)
	}
	return t
}()

func runeFlagsSlow(r rune) uint8 {
	var f uint8
	if unicode.IsLetter(r) {
		f |= fLetter
	}
	if unicode.IsNumber(r) {
		f |= fNumber
	}
	if unicode.IsSpace(r) {
		f |= fSpace
	}
	mark := unicode.IsMark(r)
	both := mark || unicode.Is(unicode.Lm, r) || unicode.Is(unicode.Lo, r)
	if both || unicode.Is(unicode.Lu, r) || unicode.Is(unicode.Lt, r) {
		f |= fUpper
	}
	if both || unicode.Is(unicode.Ll, r) {
		f |= fLower
	}
	if r == '\r' || r == '\n' {
		f |= fNewline
	}
	return f
}

// at returns the flags and byte size of the rune at s[i].
func at(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiFlags[c], 1
	}
	return atRune(s, i)
}

// atRune is at for a rune that is not ASCII: kept apart so that at, called
// for nearly every byte of the text, is inlined. Valid two- and three-byte
// sequences (accented, Cyrillic, Greek, CJK letters) are decoded here, as
// utf8.DecodeRuneInString decodes them: its call cost a CJK rune about a
// third of its flags (TestAtRuneSameAsDecode).
func atRune(s string, i int) (uint8, int) {
	switch c0 := s[i]; {
	case c0 < 0xC2 || c0 >= 0xF0: // a continuation byte, overlong, or four bytes
	case c0 < 0xE0:
		if i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
			return flagsOf(rune(c0&0x1F)<<6 | rune(s[i+1]&0x3F)), 2
		}
	case i+2 < len(s):
		if c1, c2 := s[i+1], s[i+2]; c1&0xC0 == 0x80 && c2&0xC0 == 0x80 {
			// not overlong (E0 80..9F), not a surrogate (ED A0..BF)
			if r := rune(c0&0x0F)<<12 | rune(c1&0x3F)<<6 | rune(c2&0x3F); r >= 0x800 && (r < 0xD800 || r > 0xDFFF) {
				return flagsOf(r), 3
			}
		}
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return flagsOf(r), n
}

// isOther: [^\s\p{L}\p{N}]
func isOther(f uint8) bool { return f&(fSpace|fLetter|fNumber) == 0 }

// isPrefix: [^\r\n\p{L}\p{N}]
func isPrefix(f uint8) bool { return f&(fNewline|fLetter|fNumber) == 0 }

// run returns the end of the run of runes from i having any flag in mask.
func run(s string, i int, mask uint8) int {
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf { // ASCII without a call
			if asciiFlags[c]&mask == 0 {
				return i
			}
			i++
			continue
		}
		f, n := atRune(s, i)
		if f&mask == 0 {
			break
		}
		i += n
	}
	return i
}

// contraction returns the length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i],
// or 0.
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return 0
	}
	lower := func(c byte) byte {
		if 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if i+2 < len(s) && lower(s[i+2]) == 'e' {
			return 3
		}
	case 'l':
		if i+2 < len(s) && lower(s[i+2]) == 'l' {
			return 3
		}
	}
	return 0
}

// nextPiece returns the end of the pre-tokenizer piece starting at s[i]:
// the ASCII fast path's (pretok_ascii.go) when it can decide, else
// generalPiece's.
func (c *bpeCounter) nextPiece(s string, i int) int { return c.piece(s, i, false) }

// piece is nextPiece; with check set, -1 when the general matcher's piece
// is not valid UTF-8 (the ASCII fast path's pieces are ASCII).
func (c *bpeCounter) piece(s string, i int, check bool) int {
	if s[i] < utf8.RuneSelf {
		var e int
		if c.o200k {
			e = asciiPieceO200k(s, i)
		} else {
			e = asciiPieceCL100k(s, i)
		}
		if e >= 0 {
			return e
		}
	}
	j := c.generalPiece(s, i)
	if check && !utf8.ValidString(s[i:j]) {
		return -1
	}
	return j
}

// generalPiece returns the end of the pre-tokenizer piece starting at s[i],
// for any text: the split pattern's alternatives tried in order, rune by
// rune.
func (c *bpeCounter) generalPiece(s string, i int) int {
	f0, n0 := at(s, i)
	if c.o200k {
		if e := o200kLetters(s, i, f0, n0); e >= 0 {
			return e
		}
	} else {
		// '(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+'
		if l := contraction(s, i); l > 0 {
			return i + l
		}
		if f0&fLetter != 0 {
			return run(s, i, fLetter)
		}
		if isPrefix(f0) && i+n0 < len(s) {
			if f1, _ := at(s, i+n0); f1&fLetter != 0 {
				return run(s, i+n0, fLetter)
			}
		}
	}
	// \p{N}{1,3}
	if f0&fNumber != 0 {
		j := i
		for k := 0; k < 3 && j < len(s); k++ {
			f, n := at(s, j)
			if f&fNumber == 0 {
				break
			}
			j += n
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*' (o200k: '[\r\n/]*')
	start := -1
	if isOther(f0) {
		start = i
	} else if s[i] == ' ' && i+1 < len(s) {
		if f1, _ := at(s, i+1); isOther(f1) {
			start = i + 1
		}
	}
	if start >= 0 {
		j := start
		for j < len(s) {
			f, n := at(s, j)
			if !isOther(f) {
				break
			}
			j += n
		}
		for j < len(s) && (s[j] == '\r' || s[j] == '\n' || (c.o200k && s[j] == '/')) {
			j++
		}
		return j
	}
	// f0 is whitespace. '\s*[\r\n]+': up to the run's last newline.
	j := run(s, i, fSpace)
	for k := j - 1; k >= i; k-- {
		if s[k] == '\r' || s[k] == '\n' {
			return k + 1
		}
	}
	// '\s+(?!\S)': the run, less its last rune when a non-space follows.
	if j < len(s) {
		if _, n := utf8.DecodeLastRuneInString(s[i:j]); j-n > i {
			return j - n
		}
	}
	return j // '\s+'
}

// o200kLetters matches o200k's two letter alternatives at s[i]:
// '[^\r\n\p{L}\p{N}]?[U]*[L]+(?i:'s|…)?' then '[^\r\n\p{L}\p{N}]?[U]+[L]*(?i:'s|…)?'
// with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], L = [\p{Ll}\p{Lm}\p{Lo}\p{M}],
// trying the optional prefix first, as a backtracking engine does. It
// returns the piece's end, or -1.
func o200kLetters(s string, i int, f0 uint8, n0 int) int {
	pre := isPrefix(f0) && i+n0 < len(s)
	if pre {
		if e := o200kBody1(s, i+n0); e >= 0 {
			return e
		}
	}
	if e := o200kBody1(s, i); e >= 0 {
		return e
	}
	if pre {
		if e := o200kBody2(s, i+n0); e >= 0 {
			return e
		}
	}
	return o200kBody2(s, i)
}

// o200kBody1 matches '[U]*[L]+(?i:'s|…)?' at s[i], or returns -1. Greedy
// U* backtracks to the last position where an L rune can start.
func o200kBody1(s string, i int) int {
	a := run(s, i, fUpper)
	if a < len(s) {
		if f, _ := at(s, a); f&fLower != 0 {
			return withContraction(s, run(s, a, fLower))
		}
	}
	for k := a; k > i; {
		r, n := utf8.DecodeLastRuneInString(s[i:k])
		k -= n
		if runeFlags(r)&fLower != 0 {
			return withContraction(s, run(s, k, fLower))
		}
	}
	return -1
}

// o200kBody2 matches '[U]+[L]*(?i:'s|…)?' at s[i], or returns -1.
func o200kBody2(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	if f, _ := at(s, i); f&fUpper == 0 {
		return -1
	}
	return withContraction(s, run(s, run(s, i, fUpper), fLower))
}

// withContraction is j, or the end of a contraction at s[j]. It tests for
// the apostrophe itself so that it inlines and most letter runs, which end
// otherwise, make no call.
func withContraction(s string, j int) int {
	if j < len(s) && s[j] == '\'' {
		return j + contraction(s, j)
	}
	return j
}

func runeFlags(r rune) uint8 {
	if r < utf8.RuneSelf {
		return asciiFlags[r]
	}
	return flagsOf(r)
}

// count returns the number of tokens of text. Invalid UTF-8 counts as one
// U+FFFD per bad byte, as tiktoken-go does. The text is not validated
// first: the ASCII fast path's pieces are ASCII, and only the general
// matcher's are checked (utf8.ValidString of the piece), as a text is
// valid UTF-8 when every piece of it is; a bad piece makes it count the
// text again, decoded. A whole-text ValidString cost a 64-byte text about
// a tenth of its count.
//
// A text of at most shortText bytes that is one piece (a message's role, a
// tool's name) is that piece's tokens (pieceTokens), without the piece
// memo: the memo's pool cost such a text about 100 instructions of its
// 300, and its counts are pieceTokens' (TestShortTextSameAsPieces,
// FuzzShortTextSameAsPieces).
func (c *bpeCounter) count(text string) int64 { return c.countIn(nil, text) }

// countIn is count with the piece memo m, one of c's (nil: a memo from
// c's pool, taken and given back for this text). With m, a text of 2 to
// textMemoBytes bytes is looked up whole in m's text memo first, and its
// count remembered there when it is not found.
func (c *bpeCounter) countIn(m *pieceMemo, text string) int64 {
	if m != nil && !c.noMemo && len(text) >= 2 && len(text) <= textMemoBytes {
		sl := m.texts.slot(text)
		if sl.holds(text, 0) {
			return int64(sl.tokens)
		}
		n := c.countShort(m, text)
		sl.keep(text, 0, n)
		return n
	}
	return c.countShort(m, text)
}

// countShort is countIn without the text memo.
func (c *bpeCounter) countShort(m *pieceMemo, text string) int64 {
	if len(text) <= shortText && text != "" {
		if j := c.piece(text, 0, true); j == len(text) {
			return c.pieceTokens(text)
		}
	}
	n, _, ok := c.countPiecesIn(m, text, 0, len(text), true)
	if !ok {
		text = validText(text)
		n, _, _ = c.countPiecesIn(m, text, 0, len(text), false)
	}
	return n
}

// memoCounter is a bpeCounter holding one piece memo (and one buffer for
// unescaped text, countRaw's) across the texts of one request, taken from
// the counter's pool once (takeMemo) and given back once (putMemo): each
// text counted took the memo from the pool and gave it back, about 115
// instructions a text (a cold 1 KiB chat body counts some 15), and each
// escaped string a buffer from another pool likewise. Its counts are its
// counter's (the memo only remembers them): TestMemoCounterSameCounts,
// FuzzMemoCounterSameCounts. It belongs to one goroutine at a time.
type memoCounter struct {
	bpe  *bpeCounter
	memo pieceMemo
	// unescaped is countRaw's buffer, empty between uses.
	unescaped []byte
	// schemas are the counts of tools' parameters objects
	// (toolsCounter.parameters).
	schemas schemaMemo
}

// count is the number of tokens of text, as bpeCounter.count.
func (mc *memoCounter) count(text string) int64 { return mc.bpe.countIn(&mc.memo, text) }

// takeMemo returns a memoCounter of c from its pool (or a new one).
func (c *bpeCounter) takeMemo() *memoCounter {
	if mc, _ := c.memos.Get().(*memoCounter); mc != nil {
		return mc
	}
	return &memoCounter{bpe: c}
}

// putMemo gives mc, taken from c with takeMemo and no longer used, back
// to c's pool.
func (c *bpeCounter) putMemo(mc *memoCounter) {
	if cap(mc.unescaped) > maxPooledUnescape {
		mc.unescaped = nil
	}
	c.memos.Put(mc)
}

// shortText is the longest text, in bytes, count takes as one piece when
// it is one: a message's role ("assistant"), a function's name.
const shortText = 16

// countFrom counts the pieces of valid UTF-8 text from byte i, a piece
// boundary, until the first piece that ends at or past stop: it returns
// their tokens and where they end (a piece boundary, at least stop unless
// text ends first).
func (c *bpeCounter) countFrom(text string, i, stop int) (int64, int) {
	n, end, _ := c.countPieces(text, i, stop, false)
	return n, end
}

// countPieces is countFrom for text that may not be valid UTF-8 when check
// is set: it stops, ok false, at the first piece of the general matcher
// that is not.
func (c *bpeCounter) countPieces(text string, i, stop int, check bool) (n int64, end int, ok bool) {
	return c.countPiecesIn(nil, text, i, stop, check)
}

// countPiecesIn is countPieces with the piece memo m, one of c's (nil: a
// memo from c's pool, taken and given back for this text).
func (c *bpeCounter) countPiecesIn(m *pieceMemo, text string, i, stop int, check bool) (n int64, end int, ok bool) {
	if c.noMemo {
		for i < len(text) && i < stop {
			j := c.piece(text, i, check)
			if j < 0 {
				return n, i, false
			}
			n += c.pieceTokens(text[i:j])
			i = j
		}
		return n, i, true
	}
	var pooled *memoCounter
	if m == nil {
		pooled = c.takeMemo()
		m = &pooled.memo
	}
	ok = true
	for {
		k, e := c.memoPieces(m, text, i, stop)
		n, i = n+k, e
		if i >= len(text) || i >= stop {
			break
		}
		// memoPieces stopped at a piece of the general matcher that is
		// not valid UTF-8.
		if check {
			ok = false
			break
		}
		j := c.piece(text, i, false)
		n += c.memoTokens(m, text, i, j)
		i = j
	}
	if pooled != nil {
		c.putMemo(pooled)
	}
	return n, i, ok
}

// memoPieces is countPiecesIn's loop with the memo m (not nil) and its
// pieces checked: it counts the pieces of text from byte i, a piece
// boundary, until the first that ends at or past stop, or until a piece of
// the general matcher that is not valid UTF-8, where it stops (end below
// both stop and len(text)). Apart from countPiecesIn so that the loop
// holds only the values every piece needs (c, m, text, i, stop, n), and
// its calls pass i and n through (pieceAt): with the pooled memo, check
// and the pairs table live in it too, and i and n live across its calls,
// the loop head spilled i and n on each piece and each call reloaded ten
// values (perf27: the loop's own instructions 8.5% fewer, counts the
// same: TestInlinePiecesSameAsPlain, TestPiecesUncheckedSameAsPlain).
func (c *bpeCounter) memoPieces(m *pieceMemo, text string, i, stop int) (n int64, end int) {
	for i < len(text) && i < stop {
		// piece, its o200k ASCII case written out (piece does not inline),
		// and of that asciiPieceO200k's commonest pieces: a word (an
		// optional byte that is neither a letter, a digit nor a newline,
		// capitals, small letters, an optional contraction), digits,
		// punctuation (after a space too), and one whitespace byte before
		// a digit or punctuation. Each gives up, as classRun and
		// asciiDigits do, where a decision would depend on a byte that
		// is not ASCII.
		j := -1
		if b := text[i]; c.o200k && b < utf8.RuneSelf {
			k := byteClass[b]
			if k&bLetter != 0 {
				j = i
			} else if k&(bSpace|bOther) != 0 && i+1 < len(text) && byteClass[text[i+1]]&bLetter != 0 {
				j = i + 1
			}
			switch {
			case j >= 0:
				for j < len(text) && byteClass[text[j]] == bUpper {
					j++
				}
				// The small letters eight at a time (notLower), then
				// byte by byte in the last fewer than eight.
				for j+8 <= len(text) {
					if m := notLower(le64(text[j : j+8])); m != 0 {
						j += bits.TrailingZeros64(m) >> 3
						goto lowerEnded
					}
					j += 8
				}
				for j < len(text) && byteClass[text[j]] == bLower {
					j++
				}
			lowerEnded:
				if j < len(text) {
					if e := text[j]; e >= utf8.RuneSelf {
						j = -1
					} else if e == '\'' {
						j += contraction(text, j)
					}
				}
			case k == bDigit: // '\p{N}{1,3}'
				j = i + 1
				for j < len(text) && j < i+3 && byteClass[text[j]] == bDigit {
					j++
				}
				if j < len(text) && j < i+3 && text[j] >= utf8.RuneSelf {
					j = -1 // may be a digit of another script
				}
			case k == bOther || b == ' ' && i+1 < len(text) && byteClass[text[i+1]] == bOther:
				// ' ?[^\s\p{L}\p{N}]+[\r\n/]*' (a space before
				// punctuation: ` "`, ` {"`, ` :=` in code and JSON;
				// its run starts at i+1 either way)
				j = i + 1
				for j < len(text) && byteClass[text[j]] == bOther {
					j++
				}
				if j < len(text) && text[j] >= utf8.RuneSelf {
					j = -1
				} else {
					for j < len(text) && (text[j] == '\r' || text[j] == '\n' || text[j] == '/') {
						j++
					}
				}
			case k == bSpace && i+1 < len(text) && byteClass[text[i+1]]&(bDigit|bOther) != 0:
				// '\s+': one whitespace byte before a digit, or before
				// punctuation when it is not a space (a tab)
				j = i + 1
			}
			// other pieces (runs of spaces, a newline, a letter after a
			// byte that is not ASCII) are piece's, asciiPieceO200k first
		}
		if j < 0 {
			if n, i, j = c.pieceAt(text, i, n); j < 0 {
				break
			}
		}
		// memoTokens, its common cases written out (it does not inline,
		// and the call with its spills cost a piece about 40
		// instructions): a byte is a token, two bytes are one token or
		// two (the pairs table), 3 to 16 bytes with 16 bytes of text
		// left are keyed from two word loads and looked up in the memo
		// here; the rest, and misses, call memoTokens.
		switch l := j - i; {
		case l == 1:
			n++
		case l == 2:
			n += 2
			if c.pairs[int(text[i])<<8|int(text[i+1])] >= 0 {
				n--
			}
		case l <= 16 && (i+16 <= len(text) || j >= 8):
			var lo, hi, h uint64
			if i+16 <= len(text) { // pieceKey's loads from the piece's start
				w := text[i : i+16]
				lo, hi = le64(w[:8]), le64(w[8:16])
				// the masks from a table: a variable shift must
				// take its count in CX, which holds the text
				// here, and moving it cost a piece some 6
				// instructions
				if l <= 8 {
					lo, hi = lo&lowBytes[l&15], 0
				} else {
					hi &= lowBytes[(l-8)&15]
				}
			} else if l <= 8 { // pieceKeyPacked's, from its end
				lo = le64(text[j-8:j]) >> ((64 - 8*l) & 63)
			} else {
				lo, hi = le64(text[i:i+8]), le64(text[j-8:j])>>((128-8*l)&63)
			}
			if l <= 8 {
				h = hashKey(lo, l)
			} else {
				h = midHash(lo, hi, l)
			}
			if s := &m.slots[h>>(64-12)]; int(s.n) == l && s.lo == lo && s.hi == hi {
				n += int64(s.tokens)
			} else {
				n, j = c.memoMissAt(s, text[i:j], lo, hi, h, n, j)
			}
		default:
			n, j = c.memoTokensAt(m, text, i, j, n)
		}
		i = j
	}
	return n, i
}

// lowBytes[k] keeps the low k bytes of a word (k ≤ 8), for memoPieces'
// keys; the rest of its 16 entries are never read.
var lowBytes = [16]uint64{0, 0xff, 0xffff, 0xffffff, 0xffffffff, 0xffffffffff, 0xffffffffffff, 0xffffffffffffff, ^uint64(0)}

// pieceAt, memoMissAt and memoTokensAt are memoPieces' calls of piece,
// memoMiss and memoTokens with the loop's i (or j) and n passed through
// and returned: what a call returns is not live across it, so the loop
// keeps i and n in registers from piece to piece (a value live across a
// call is spilled where it is made, and i and n are made at the loop's
// head: two stores a piece, and reloads after every call). Not inlined,
// or the values would be live across the calls inside.

// pieceAt is n, i and c.piece(text, i, true).
//
//go:noinline
func (c *bpeCounter) pieceAt(text string, i int, n int64) (int64, int, int) {
	return n, i, c.piece(text, i, true)
}

// memoMissAt is n plus c.memoMiss(s, p, lo, hi, h), and j.
//
//go:noinline
func (c *bpeCounter) memoMissAt(s *memoSlot, p string, lo, hi, h uint64, n int64, j int) (int64, int) {
	return n + c.memoMiss(s, p, lo, hi, h), j
}

// memoTokensAt is n plus c.memoTokens(m, text, i, j), and j.
//
//go:noinline
func (c *bpeCounter) memoTokensAt(m *pieceMemo, text string, i, j int, n int64) (int64, int) {
	return n + c.memoTokens(m, text, i, j), j
}

// shortPiece is the longest piece, in bytes, merged by scanning for the
// lowest rank (tiktoken's own loop, quadratic in the piece but fastest for
// the short pieces of natural text); longer ones use a heap.
const shortPiece = 48

// shortWidePiece is shortPiece for a piece that ends in a byte that is not
// ASCII (a run of CJK letters, of accented or Cyrillic ones): its runes
// take two to four bytes each, so it has more parts to merge than an ASCII
// piece of its length, and the heap is the faster past fewer bytes.
const shortWidePiece = 24

// pieceTokens is the number of tokens tiktoken's byte-pair merge splits one
// piece into (the algorithm of tiktoken-go's bytePairMerge, counting only).
func (c *bpeCounter) pieceTokens(p string) int64 { return c.pieceTokensIn(nil, p) }

// pieceTokensIn is pieceTokens with the piece memo m (nil: none), which
// counts the segments of a long piece cut by cutMerge, and remembers the
// counts of pieces of 17 to textMemoBytes bytes in its text memo, marked
// as merges (textMemoPiece, as segmentTokens marks a segment's: a piece's
// count is its merge's, 1 for a token, which merges whole). Such a piece
// (a run of spaces or dashes, a long identifier, a CJK phrase) missed the
// piece memo, which holds 16 bytes at most, and was merged each time it
// came: 9,000 instructions on average, 2.3% of a cold 16 KiB weigh
// (perf23).
func (c *bpeCounter) pieceTokensIn(m *pieceMemo, p string) int64 {
	if len(p) <= 1 {
		return int64(len(p))
	}
	if len(p) > maxPieceBytes {
		return segmented(p, c.pieceTokens)
	}
	if m != nil && len(p) > 16 && len(p) <= textMemoBytes {
		sl := m.texts.slot(p)
		if sl.holds(p, textMemoPiece) {
			return int64(sl.tokens)
		}
		n := c.pieceMerged(m, p)
		sl.keep(p, textMemoPiece, n)
		return n
	}
	return c.pieceMerged(m, p)
}

// pieceMerged is pieceTokensIn of a piece of 2 to maxPieceBytes bytes,
// not remembered: 1 for a token, else its merge.
func (c *bpeCounter) pieceMerged(m *pieceMemo, p string) int64 {
	if _, ok := c.ranks.get(p); ok {
		return 1
	}
	if longMerge(p) {
		return c.cutMerge(m, p)
	}
	return c.mergeTokens(p)
}

// mergeTokens is pieceTokens for a piece of 2 to maxPieceBytes bytes that
// is not itself a token: the byte-pair merge's count of p (of any p of 2
// or more bytes, a token or not).
//
// A piece of up to shortPiece bytes is merged by tiktoken's own loop: the
// pair of the lowest rank found by a scan of the parts, merged, until no
// pair is a token (quadratic in the piece, but fastest for the short
// pieces of natural text). Each part is one word, the rank of the pair it
// starts above the byte offset where it starts (mergePart), so that the
// scan is a minimum of words: the lowest rank, and of equal ranks (a pair
// that is no token, noPair) the leftmost, which is tiktoken's order. Its
// rank look-ups go through rankOf (a string of up to 8 bytes keyed from
// word loads, most strings that are not tokens turned away by the filter
// without a probe). Against the loop over {start, rank int} pairs with a
// closure over get, a cold 1 KiB load-benchmark body's merges took about
// half the instructions (perf29); TestMergeTokensSameAsScan,
// FuzzMergeTokensSameAsScan hold it to that loop.
func (c *bpeCounter) mergeTokens(p string) int64 {
	if longMerge(p) {
		return c.cutMerge(nil, p)
	}
	var buf [shortPiece + 1]uint64
	n := len(p)
	parts := buf[:n+1]
	pairs := c.pairs
	for i := 0; i+1 < n; i++ {
		parts[i] = mergePart(pairs[int(p[i])<<8|int(p[i+1])], i)
	}
	parts[n-1] = mergePart(-1, n-1)
	parts[n] = mergePart(-1, n)
	t := c.ranks
	for len(parts) > 2 {
		// The least word of the parts that start a pair (all but the
		// last part and the end).
		last := len(parts) - 2
		m, i := parts[0], 0
		for k := 1; k < last; k++ {
			if v := parts[k]; v < m {
				m, i = v, k
			}
		}
		if m >= noPair {
			break
		}
		// Parts i and i+1 become one: the parts after them move down
		// one place, and the pairs that part i now starts and ends
		// are looked up.
		for k := i + 1; k < len(parts)-1; k++ {
			parts[k] = parts[k+1]
		}
		parts = parts[:len(parts)-1]
		a := int(m & 0xff)
		r := int32(-1)
		if i+2 < len(parts) {
			r = t.rankOf(p, a, int(parts[i+2]&0xff))
		}
		parts[i] = mergePart(r, a)
		if i > 0 {
			b := int(parts[i-1] & 0xff)
			parts[i-1] = mergePart(t.rankOf(p, b, int(parts[i+1]&0xff)), b)
		}
	}
	return int64(len(parts) - 1)
}

// noPair is a mergePart's rank of a pair that is no token (or no pair:
// the last part), above every rank.
const noPair = uint64(math.MaxUint32) << 8

// mergePart is a part of mergeTokens' loop: the rank r of the pair it
// starts (-1: not a token) above its start, a byte offset of the piece
// (at most shortPiece, under 256).
func mergePart(r int32, start int) uint64 {
	const _ uint8 = shortPiece // a start must fit the word's low byte
	// -1 as a uint32 is math.MaxUint32: noPair, without a branch
	return uint64(uint32(r))<<8 | uint64(start)
}

// longMerge reports whether p is merged with the heap (heapMerge), not by
// scanning for the lowest rank (mergeTokens' loop): past shortPiece bytes, or
// shortWidePiece when it ends in a byte that is not ASCII.
func longMerge(p string) bool {
	return len(p) > shortPiece || len(p) > shortWidePiece && p[len(p)-1] >= utf8.RuneSelf
}

// crossBits is the size of bpeCounter.cross, as a power of two: 2^21 bits,
// 256 KiB. o200k_base's tokens hold about 103,000 distinct four-byte
// strings, so a string that no token holds finds its bit set (and a cut
// may be missed) about once in 20.
const crossBits = 21

// crossBit is the bit of bpeCounter.cross for the first four bytes of s.
func crossBit(s string) uint32 {
	return uint32(uint64(loadLE32(s)) * 0x9e3779b97f4a7c15 >> (64 - crossBits))
}

// cutMerge is the byte-pair merge's count of a long piece p (longMerge),
// the sum of those of its segments between cuts. A cut is a place x (3 ≤
// x ≤ len(p)−3) that no token can span: the two bytes around it,
// p[x-1:x+1], are not a token, nor are the three-byte strings p[x-2:x+1]
// and p[x-1:x+2], and no token holds any of the three four-byte strings
// that hold p[x-1:x+1] (p[x-3:x+1], p[x-2:x+2], p[x-1:x+3]: their bits in
// the cross filter are clear). Each part a merge makes is a token, so no
// part ever holds both p[x-1] and p[x]: such a part p[a:b] (a ≤ x−1,
// b ≥ x+1) of two or three bytes would be one of those strings, and one
// of four or more holds the four bytes from max(a, x−3), one of the
// three. No pair of parts across x is ever merged, then, and the merges
// on either side are those of that side alone, in the same order (the
// lowest rank first, the leftmost of equal ranks: a rank tie across x
// orders merges of two independent sides); the parts at the end are the
// segments'.
//
// A segment of at most 16 bytes is counted through the piece memo m (nil:
// none) as a piece is (memoTokens: 1 when it is a token, else its merge):
// the same count, as every token of the counter's vocabulary merges whole
// from its bytes (TestEveryTokenMergesWhole; tiktoken takes the
// whole-token shortcut for a whole piece only). A longer segment, and any
// without a memo, is merged from its bytes.
//
// A long CJK piece is most of what this cuts: o200k_base cuts the load
// benchmark's Chinese and Japanese text about every third or fourth
// character, into words and short phrases that recur, where the heap
// merged the whole 130-byte piece for about 38,000 instructions. A piece
// with no cut (a run of one letter, ASCII words joined without a space)
// costs the check of its bytes, a table load or three each, and is merged
// whole as before (TestCutMergeSameAsScan, FuzzCutMerge).
func (c *bpeCounter) cutMerge(m *pieceMemo, p string) int64 {
	x := c.nextCut(p, 3)
	if x < 0 {
		return c.heapMerge(p)
	}
	var n int64
	start := 0
	for ; x >= 0; x = c.nextCut(p, x+1) {
		n += c.segmentTokens(m, p, start, x)
		start = x
	}
	return n + c.segmentTokens(m, p, start, len(p))
}

// nextCut is the first cut of p (see cutMerge) at x or after; -1 when
// there is none (or c has no cross filter).
func (c *bpeCounter) nextCut(p string, x int) int {
	cross, pairs, t := c.cross, c.pairs, c.ranks
	if cross == nil {
		return -1
	}
	for x = max(x, 3); x+3 <= len(p); x++ {
		if pairs[int(p[x-1])<<8|int(p[x])] >= 0 {
			continue
		}
		if b := crossBit(p[x-3:]); cross[b/64]&(1<<(b%64)) != 0 {
			continue
		}
		if b := crossBit(p[x-2:]); cross[b/64]&(1<<(b%64)) != 0 {
			continue
		}
		if b := crossBit(p[x-1:]); cross[b/64]&(1<<(b%64)) != 0 {
			continue
		}
		if t.rankOf(p, x-2, x+1) >= 0 || t.rankOf(p, x-1, x+2) >= 0 {
			continue
		}
		return x
	}
	return -1
}

// segmentTokens is the byte-pair merge's count of p[i:j], a segment of a
// piece cut by cutMerge (one byte or more), through the memo m when it
// holds at most 16 bytes (see cutMerge), through m's text memo when it
// holds at most textMemoBytes.
func (c *bpeCounter) segmentTokens(m *pieceMemo, p string, i, j int) int64 {
	switch s := p[i:j]; {
	case len(s) == 1:
		return 1
	case m != nil && len(s) <= 16:
		return c.memoTokens(m, p, i, j)
	case m != nil && len(s) <= textMemoBytes:
		// A longer word or phrase (CJK: 6 to 16 characters) through the
		// text memo, marked as a piece (a merge, not a text's count).
		sl := m.texts.slot(s)
		if sl.holds(s, textMemoPiece) {
			return int64(sl.tokens)
		}
		var n int64
		if longMerge(s) {
			n = c.heapMerge(s)
		} else {
			n = c.mergeTokens(s)
		}
		sl.keep(s, textMemoPiece, n)
		return n
	case longMerge(s):
		return c.heapMerge(s)
	default:
		return c.mergeTokens(s)
	}
}

// A merge candidate in heapMerge is one uint64: the pair's rank in the high
// 32 bits, the byte offset where it starts in the low 32, so that the
// smallest value is the lowest rank, and of equal ranks the leftmost pair.
func candidate(rank, pos int) uint64 { return uint64(rank)<<32 | uint64(pos) }

// mergeNode is one boundary of heapMerge's linked list: the next and
// previous live boundaries (-1: none) and the rank of the pair of parts
// starting there (-1: none, or the boundary died), kept together so that a
// merge touches one place per boundary, not three arrays.
type mergeNode struct{ next, prev, rank int32 }

// mergeScratch is heapMerge's working memory, pooled.
type mergeScratch struct {
	nodes []mergeNode // by boundary (byte offset), 0 to len(piece)
	heap  []uint64
}

// mergePool pools heapMerge's scratches of pieces up to
// maxPooledMergeBytes.
var mergePool = sync.Pool{New: func() any { return new(mergeScratch) }}

// maxPooledMergeBytes is the longest piece, in bytes, whose merge scratch
// goes back to mergePool: 8 KiB of piece, a scratch of 160 KiB (20 bytes a
// byte: a 12-byte node and an 8-byte candidate). A longer piece's scratch
// goes to the garbage collector: pooled, it stayed in the heap across a
// collection, one for each goroutine counting at once (an answer relayed
// unread is counted 8 KiB at a time as it passes, a run of letters one
// piece), held for pieces that seldom come. Allocating it anew costs the
// clearing of 20 bytes a byte, against the hundreds of instructions a byte
// the merge itself takes: a merge of 16 KiB of random letters
// (BenchmarkHeapMergeLong/16KiB, callgrind, GOGC=off) took 8.79 M
// instructions against 8.76 M pooled (+0.4%); a piece up to 8 KiB is
// pooled as before.
const maxPooledMergeBytes = 8 << 10

// heapMerge is the byte-pair merge of a long piece in O(n log n): the same
// merges in the same order as the scan in pieceTokens (lowest rank first,
// the leftmost of equal ranks), found with a min-heap of candidate pairs
// over a linked list of boundaries. A candidate is stale, and skipped, once
// its boundary died or its pair changed (a boundary's pair only grows, and
// distinct byte strings have distinct ranks, so a changed pair has a
// different rank).
//
// A merge costs two rank lookups of the pairs it makes (rankOf: at least
// three bytes each, keyed from word loads, most of the strings that are
// not tokens turned away by the filter without a call) and a sift of the
// heap, by moving a hole rather than swapping. Against the version with a
// closure over the generic get, swaps and three boundary arrays, a count
// of BenchmarkCold/cjk/16KB/fast (about 10,500 merges) took 6.15 M
// instructions under callgrind, 5.52 M after.
func (c *bpeCounter) heapMerge(p string) int64 {
	n := len(p)
	s := mergePool.Get().(*mergeScratch)
	if cap(s.nodes) < n+1 {
		s.nodes = make([]mergeNode, n+1)
	}
	if cap(s.heap) < n {
		s.heap = make([]uint64, 0, n) // room for the first candidates, one a pair
	}
	nodes := s.nodes[:n+1]
	h := s.heap[:0]
	pairs := c.pairs
	for i := 0; i+1 < n; i++ {
		r := pairs[int(p[i])<<8|int(p[i+1])]
		nodes[i] = mergeNode{next: int32(i + 1), prev: int32(i - 1), rank: r}
		if r >= 0 {
			h = append(h, candidate(int(r), i))
		}
	}
	nodes[n-1] = mergeNode{next: int32(n), prev: int32(n - 2), rank: -1}
	nodes[n] = mergeNode{next: -1, prev: int32(n - 1), rank: -1}
	for k := len(h)/2 - 1; k >= 0; k-- {
		siftDown(h, k)
	}
	t := c.ranks
	tokens := int64(n)
	for len(h) > 0 {
		top := h[0]
		i := int32(uint32(top))
		ni := &nodes[i]
		if ni.rank != int32(top>>32) { // stale: the boundary died (rank -1) or its pair grew
			h = popTop(h)
			continue
		}
		j := ni.next // merge the parts at i and j: boundary j goes
		k := nodes[j].next
		ni.next = k
		nodes[k].prev = i // k ≥ 0: a pair starts at i, so j < n
		nodes[j].rank = -1
		tokens--
		// The boundary's new pair takes the top's place (one sift where a
		// pop and a push took two): the heap holds what it held after
		// both, so it gives the same minima in the same order.
		ni.rank = -1
		if k < int32(n) {
			ni.rank = t.rankOf(p, int(i), int(nodes[k].next))
		}
		if ni.rank >= 0 {
			h[0] = candidate(int(ni.rank), int(i))
			siftDown(h, 0)
		} else {
			h = popTop(h)
		}
		if b := ni.prev; b >= 0 {
			nb := &nodes[b]
			if nb.rank = t.rankOf(p, int(b), int(k)); nb.rank >= 0 {
				h = siftUp(append(h, candidate(int(nb.rank), int(b))))
			}
		}
	}
	s.heap = h
	if cap(s.nodes) > maxPooledMergeBytes+1 || cap(h) > maxPooledMergeBytes {
		return tokens // a long piece's scratch: not pooled
	}
	mergePool.Put(s)
	return tokens
}

// popTop removes the least element of the min-heap h.
func popTop(h []uint64) []uint64 {
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	siftDown(h, 0)
	return h
}

// siftUp restores the min-heap h after its last element was appended.
func siftUp(h []uint64) []uint64 {
	k := len(h) - 1
	x := h[k]
	for k > 0 {
		up := (k - 1) / 2
		if x >= h[up] {
			break
		}
		h[k] = h[up]
		k = up
	}
	h[k] = x
	return h
}

// siftDown restores the min-heap h below k, moving the element at k down
// through a hole (one store a level where a swap made two).
func siftDown(h []uint64, k int) {
	if k >= len(h) {
		return
	}
	x := h[k]
	for {
		l := 2*k + 1
		if l >= len(h) {
			break
		}
		m, hm := l, h[l]
		if r := l + 1; r < len(h) && h[r] < hm {
			m, hm = r, h[r]
		}
		if x <= hm {
			break
		}
		h[k] = hm
		k = m
	}
	h[k] = x
}
