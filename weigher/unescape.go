package weigher

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// unescapeJSON is the text of a JSON string whose contents (between the
// quotes) are s, decoded exactly as gjson decodes it (Result.Str), for a
// string that passed jsonscan (no control bytes, only valid escapes; bytes
// that are not UTF-8 are copied as they are, as gjson copies them): the
// runs between escapes are copied whole, where gjson appends byte by byte
// after a byte-wise search for the string's end, which cost the count of
// a new 8 KiB turn a third of its time. s itself when it holds no escape.
//
// A \u escape of a UTF-16 surrogate takes the \u escape after it, if any,
// as its pair (utf16.DecodeRune: U+FFFD when they are not a pair, both
// consumed), and a lone one is U+FFFD, as in gjson's unescape.
func unescapeJSON(s string) string {
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return s
	}
	return bytesString(appendUnescaped(make([]byte, 0, len(s)), s, i))
}

// appendUnescaped appends to b the text unescapeJSON decodes from s, whose
// first backslash is at i (i ≥ 0), and returns the extended buffer.
//
// Decoding never lengthens the text (an escape of 2 bytes is 1, one of 6
// is at most 3, a surrogate pair's 12 are 4), so the buffer is grown once
// to len(b)+len(s) and written in place. The first run (s[:i]) is copied
// whole; after each escape, the run to the next backslash is copied and
// searched eight bytes at a time (a word stored whole may write past the
// backslash, into bytes the escape's text then overwrites), and only a
// run longer than unescapeWordRun bytes goes on with strings.IndexByte
// and one copy. Runs between escapes are short in code and JSON text (a
// `\n` every line, a `\"` around every key): the count of the 128 KiB load
// benchmark's warm turn met about 390 escapes in 8 KiB, and the search and
// copy calls a run took (about 120 instructions an escape) cost more than
// the words' own loop. appendUnescapedRuns, in the tests, is the decoder
// it replaced (TestAppendUnescapedSameAsRuns, FuzzAppendUnescapedSameAsRuns).
func appendUnescaped(b []byte, s string, i int) []byte {
	n := len(b)
	b = slices.Grow(b, len(s))[:n+len(s)]
	n += copy(b[n:], s[:i])
	for {
		// s[i] is a backslash, and b[:n] ends with the text of s[:i].
		if i+1 >= len(s) {
			return b[:n] // not valid JSON: gjson stops here too
		}
		if d := shortUnescape[s[i+1]]; d != 0 {
			b[n] = d
			n++
			i += 2
		} else if s[i+1] == 'u' {
			if i+6 > len(s) {
				return b[:n]
			}
			r := hex4(s[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
				r = utf16.DecodeRune(r, hex4(s[i+2:i+6]))
				i += 6
			}
			n += utf8.EncodeRune(b[n:], r)
		} else {
			return b[:n]
		}
		// The run after the escape, to the next backslash: s[j] goes to
		// b[j+off].
		off, start := n-i, i
		for ; i+8 <= len(s); i += 8 {
			w := wordAt(s, i)
			binary.LittleEndian.PutUint64(b[i+off:], w)
			if m := backslashes(w); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto found
			}
			if i-start >= unescapeWordRun {
				k := strings.IndexByte(s[i+8:], '\\')
				if k < 0 {
					copy(b[i+8+off:], s[i+8:])
					return b[:len(s)+off]
				}
				copy(b[i+8+off:], s[i+8:i+8+k])
				i += 8 + k
				goto found
			}
		}
		for ; i < len(s); i++ {
			if s[i] == '\\' {
				goto found
			}
			b[i+off] = s[i]
		}
		return b[:len(s)+off]
	found:
		n = i + off
	}
}

// shortUnescape is the byte each escape of two bytes stands for, by the
// byte after its backslash (0: not such an escape).
var shortUnescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescapeWordRun is how many bytes of a run appendUnescaped searches a
// word at a time before it hands the rest to strings.IndexByte.
const unescapeWordRun = 32

// wordAt is s[j:j+8] as a little-endian integer, in one load (j+8 ≤
// len(s)).
func wordAt(s string, j int) uint64 {
	s = s[j : j+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// backslashes flags (0x80) the bytes of w that are backslashes, by the
// "has a zero byte" trick on w with every backslash made zero: the lowest
// flagged byte is always the first backslash (a byte above it may be
// flagged wrongly, by a borrow), and none is flagged when there is none.
func backslashes(w uint64) uint64 {
	const ones, msb = 0x0101010101010101, 0x8080808080808080
	z := w ^ (ones * '\\')
	return (z - ones) &^ z & msb
}

// unescapeBufs pools the buffers countRaw decodes escaped strings into.
var unescapeBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledUnescape is the largest buffer, in bytes, unescapeBufs keeps.
const maxPooledUnescape = 64 << 10

// countRaw is countText(enc, rawString(v)): the tokens of v, a value as
// rawValue gives it, when it is a JSON string (0 otherwise). A string
// holding an escape is decoded into a pooled buffer, not a new one: the
// text is counted and dropped (no counter keeps it), where rawString's
// copy cost a warm 1 KiB chat body about 1.5 allocations
// (TestCountRawSameAsRawString, FuzzCountRawSameAsRawString).
func countRaw(enc counter, v gjson.Result) int64 {
	if v.Type != gjson.String || len(v.Raw) < 2 {
		return 0
	}
	s := v.Raw[1 : len(v.Raw)-1]
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return countText(enc, s)
	}
	if mc, ok := enc.(*memoCounter); ok { // the request's buffer
		b := appendUnescaped(mc.unescaped[:0], s, i)
		n := mc.count(bytesString(b))
		mc.unescaped = b[:0]
		return n
	}
	bp := unescapeBufs.Get().(*[]byte)
	b := appendUnescaped((*bp)[:0], s, i)
	n := countText(enc, bytesString(b))
	if cap(b) <= maxPooledUnescape {
		*bp = b
		unescapeBufs.Put(bp)
	}
	return n
}

// hex4 is the value of four hexadecimal digits (0 when one is not, as
// gjson's strconv.ParseUint gives).
func hex4(s string) rune {
	var r rune
	for i := range 4 {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0
		}
		r = r<<4 | rune(c)
	}
	return r
}

// bytesString is b as a string, without a copy: b is not written after.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
