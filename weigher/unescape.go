package weigher

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
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
	b := make([]byte, 0, len(s))
	for i >= 0 {
		b = append(b, s[:i]...)
		s = s[i:]
		if len(s) < 2 {
			return bytesString(b) // not valid JSON: gjson stops here too
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
				return bytesString(b)
			}
			r := hex4(s[2:6])
			s = s[6:]
			if utf16.IsSurrogate(r) && len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
				r = utf16.DecodeRune(r, hex4(s[2:6]))
				s = s[6:]
			}
			b = utf8.AppendRune(b, r)
		default:
			return bytesString(b)
		}
		i = strings.IndexByte(s, '\\')
	}
	return bytesString(append(b, s...))
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
