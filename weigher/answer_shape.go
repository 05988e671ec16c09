package weigher

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// An upstream's JSON answers to one kind of request differ, answer to
// answer, mostly in their scalar values: the id, the time, the text, the
// usage figures. An answerShape is an answer answerScan.scan decided,
// kept as its bytes outside its value strings and numbers (keys,
// punctuation, whitespace, true, false, null) and the places of those
// tokens. A new answer has the shape when its bytes equal the shape's
// everywhere outside the tokens, and each token is a valid string
// (jsonscan.CheckString) where the shape has a string, a valid number
// (jsonscan.CheckNumber) where it has a number. Such an answer is the
// shape's with scalars swapped for valid ones of the same kind: the same
// structure, keys (none escaped, none named twice), nesting and key count,
// so scan decides it as it decided the shape's and notes its members at
// the same places, moved by the change in length of the tokens before
// them. Matching compares the bytes between tokens as blocks and reads
// only the tokens, where scan weighs every key (its print, its bloom
// bit, the keys open) and every byte of structure.
//
// The shape of the last chat answer scan decided is kept (chatShape); a
// decided chat answer that does not match it replaces it, at most every
// shapeRenew-th miss once there is one (an upstream whose answers vary in
// shape costs a shape made at most that often). Memory: one shape, at
// most maxShapeBytes of text and maxShapeToks tokens.

// The bounds of a shape: an answer beyond them is not kept as one.
const (
	maxShapeBytes = 4 << 10 // bytes of answer
	maxShapeToks  = 96      // value strings and numbers
	shapeRenew    = 16      // misses of a shape before a decided answer replaces it
)

// shapeTok is one value string or number of a shape: where it lies in
// the shape's text, and whether it is a number.
type shapeTok struct {
	at, end int32
	num     bool
}

// answerShape is an answer's shape (see above). Immutable once made,
// but for misses; safe for concurrent use.
type answerShape struct {
	a, b  string // the ask it was scanned for
	chat  bool
	depth int    // its nesting (containers open at most)
	text  []byte // the answer
	toks  []shapeTok
	// at and end are the answer's noted places (answerScan's slots, -1:
	// absent); atToks and endToks the number of tokens that end at or
	// before them, whose change in length moves them.
	at, end         [slotCount]int32
	atToks, endToks [slotCount]uint8
	misses          atomic.Uint32
}

// chatShape holds the shape of the last chat answer decided (nil: none
// yet). Package state, as the count cache is: answers of one upstream look
// alike whichever Weigher reads them.
var chatShape atomic.Pointer[answerShape]

// fromShape reads body by the shape held for s's ask, under the nesting
// limit limit (as scan resolves it): true, with s's slots set as scan
// sets them, when body has the shape; false when it has not or there is
// none (s's slots then untouched).
func (s *answerScan) fromShape(body []byte, limit int) bool {
	sh := chatShape.Load()
	if sh == nil {
		return false
	}
	if sh.a != s.a || sh.b != s.b || sh.chat != s.chat || sh.depth > limit || len(body) >= 1<<31-1 {
		sh.miss()
		return false
	}
	// The answer is compared with the shape a word at a time as far as
	// they agree; where they part, within a token, that token is read
	// from the answer, and the comparison goes on past it. A token that
	// ends before the point they part is the shape's own (the byte after
	// it agrees too, so a number of the answer ends where the shape's
	// does); one they part inside, or right after (a number may go on),
	// is read.
	var shift [maxShapeToks + 1]int32 // shift[k]: the change in length of the first k tokens
	var (
		text, toks = sh.text, sh.toks
		n          = len(body)
		p, q, k    int // where text and body agree up to, and the next token
		cum        int32
	)
	for {
		at := p + commonPrefix(text[p:], body[q:]) // where they part (text)
		for k < len(toks) && int(toks[k].end) < at {
			k++
			shift[k] = cum
		}
		if k == len(toks) || at < int(toks[k].at) {
			// Parted outside any token, or at the end of one of them.
			if k == len(toks) && at == len(text) && n-q == len(text)-p {
				break
			}
			sh.miss()
			return false
		}
		t := toks[k]
		q += int(t.at) - p // the token's start in body
		var (
			end int
			ok  bool
		)
		if t.num {
			end, ok = answerNumber(body, q)
		} else {
			end, ok = answerString(body, q)
		}
		if !ok {
			sh.miss()
			return false
		}
		cum += int32(end-q) - (t.end - t.at)
		k++
		shift[k] = cum
		p, q = int(t.end), end
	}
	for i := range s.at {
		if sh.at[i] < 0 {
			s.at[i] = -1 // its end as scan leaves it: unset
			continue
		}
		s.at[i] = sh.at[i] + shift[sh.atToks[i]]
		s.end[i] = sh.end[i] + shift[sh.endToks[i]]
	}
	return true
}

// miss counts a body that did not have sh.
func (sh *answerShape) miss() { sh.misses.Add(1) }

// keepShape makes body, a chat answer s decided, chatShape when there is
// none, or when the one there has missed a multiple of shapeRenew times;
// not when body is beyond a shape's bounds.
func (s *answerScan) keepShape(body []byte) {
	if old := chatShape.Load(); old != nil && old.misses.Load()%shapeRenew != 0 {
		return
	}
	if len(body) > maxShapeBytes {
		return
	}
	sh := &answerShape{a: s.a, b: s.b, chat: s.chat, at: s.at, end: s.end}
	depth := 0
	for i, n := 0, len(body); i < n; {
		switch c := body[i]; {
		case c == '{' || c == '[':
			depth++
			sh.depth = max(sh.depth, depth)
			i++
		case c == '}' || c == ']':
			depth--
			i++
		case c == '"':
			end, _ := answerString(body, i)
			if j := skipSpaceBytes(body, end); j < n && body[j] == ':' {
				i = end // a key: part of the text
				continue
			}
			if len(sh.toks) == maxShapeToks {
				return
			}
			sh.toks = append(sh.toks, shapeTok{at: int32(i), end: int32(end)})
			i = end
		case c == '-' || c-'0' <= 9:
			end, _ := answerNumber(body, i)
			if len(sh.toks) == maxShapeToks {
				return
			}
			sh.toks = append(sh.toks, shapeTok{at: int32(i), end: int32(end), num: true})
			i = end
		default: // space, punctuation, true, false, null: text
			i++
		}
	}
	for i := range sh.at {
		for _, t := range sh.toks {
			if sh.at[i] >= 0 && t.end <= sh.at[i] {
				sh.atToks[i]++
			}
			if sh.at[i] >= 0 && t.end <= sh.end[i] {
				sh.endToks[i]++
			}
		}
	}
	sh.text = append([]byte(nil), body...)
	chatShape.Store(sh)
}

// answerString reads the string starting at b[i] as answerScan.scan
// reads a value string: the offset past it, and whether it is valid
// (jsonscan.CheckString's rules, a plain string read eight bytes at a
// time).
func answerString(b []byte, i int) (int, bool) {
	n := len(b)
	if i >= n || b[i] != '"' {
		return i, false
	}
	end := -1
	for j := i + 1; j+8 <= n; j += 8 {
		if m := stringStops(binary.LittleEndian.Uint64(b[j:])); m != 0 {
			end = j + 1 + bits.TrailingZeros64(m)/8
			break
		}
	}
	if end < 0 {
		end = plainString(b, i)
	}
	if end < 0 || b[end-1] != '"' {
		e, _, r := jsonscan.CheckString(b, i, jsonscan.Options{})
		return e, r == jsonscan.OK
	}
	return end, true
}

// answerNumber reads the number starting at b[i] as answerScan.scan
// reads one: the offset past it, and whether it is valid (a count of
// digits without a leading zero read here, any other by
// jsonscan.CheckNumber).
func answerNumber(b []byte, i int) (int, bool) {
	n := len(b)
	if i >= n {
		return i, false
	}
	j := i
	for j < n && b[j]-'0' <= 9 {
		j++
	}
	if j == i || j-i > 1 && b[i] == '0' || j < n && (b[j] == '.' || b[j]|0x20 == 'e') {
		end, r := jsonscan.CheckNumber(b, i)
		return end, r == jsonscan.OK
	}
	return j, true
}

// commonPrefix is the length of the longest common prefix of a and b,
// compared 32 bytes at a time (four words, one test), then a word at a
// time within the block where they part. Indexed, each block taken as an
// array (one bounds check for its four words): reslicing a and b at every
// word cost some 39 instructions a word under callgrind, a block costs
// about 21 here.
func commonPrefix(a, b []byte) int {
	m := min(len(a), len(b))
	a, b = a[:m], b[:m]
	i := 0
	for ; m-i >= 32; i += 32 {
		x, y := (*[32]byte)(a[i:i+32]), (*[32]byte)(b[i:i+32])
		// ^ and | bind alike in Go: each difference in parentheses.
		if (binary.LittleEndian.Uint64(x[0:8])^binary.LittleEndian.Uint64(y[0:8]))|
			(binary.LittleEndian.Uint64(x[8:16])^binary.LittleEndian.Uint64(y[8:16]))|
			(binary.LittleEndian.Uint64(x[16:24])^binary.LittleEndian.Uint64(y[16:24]))|
			(binary.LittleEndian.Uint64(x[24:32])^binary.LittleEndian.Uint64(y[24:32])) != 0 {
			break
		}
	}
	for ; m-i >= 8; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:i+8]) ^ binary.LittleEndian.Uint64(b[i:i+8]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for ; i < m; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return m
}
