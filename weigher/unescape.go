package weigher

import (
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
func appendUnescaped(b []byte, s string, i int) []byte {
	for i >= 0 {
		b = append(b, s[:i]...)
		s = s[i:]
		if len(s) < 2 {
			return b // not valid JSON: gjson stops here too
		}
		switch c := s[1]; c {
		case '"', '\\', '/':
			b, s = append(b, c), s[2:]
		case 'b':
			b, s = append(b, '\b'), s[2:]
		case 'f':
			b, s = append(b, '\f'), s[2:]
		case 'n':
			b, s = append(b, '\n'), s[2:]
		case 'r':
			b, s = append(b, '\r'), s[2:]
		case 't':
			b, s = append(b, '\t'), s[2:]
		case 'u':
			if len(s) < 6 {
				return b
			}
			r := hex4(s[2:6])
			s = s[6:]
			if utf16.IsSurrogate(r) && len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
				r = utf16.DecodeRune(r, hex4(s[2:6]))
				s = s[6:]
			}
			b = utf8.AppendRune(b, r)
		default:
			return b
		}
		i = strings.IndexByte(s, '\\')
	}
	return append(b, s...)
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
