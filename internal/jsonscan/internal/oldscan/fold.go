package oldscan

import (
	"unicode"
	"unicode/utf8"
)

// FoldKey appends key, case-folded, to dst: two keys that a decoder
// matching keys to fields "ignoring case" could take for one another fold
// to the same bytes. ASCII letters fold to lower case. Any other character
// folds to the ASCII letter it may be taken for, when it has one: Go's
// encoding/json folds each character to the smallest member of its Unicode
// simple case-folding orbit (encoding/json/fold.go), so the Kelvin sign K
// (U+212A) reads as "k" and the long s ſ (U+017F) as "s"; Java's
// String.equalsIgnoreCase compares each character's upper and lower case,
// so the dotted İ (U+0130) and dotless ı (U+0131) read as "i". Every other
// character folds to the smallest member of its orbit ([unicode.SimpleFold]),
// so "É" and "é" fold alike. Bytes that are not UTF-8 are copied as they
// are. The result is only for comparing keys; it is not meant to be shown.
func FoldKey(dst, key []byte) []byte {
	for i := 0; i < len(key); {
		c := key[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(key[i:])
		if r == utf8.RuneError && size <= 1 {
			dst = append(dst, c)
			i++
			continue
		}
		dst = utf8.AppendRune(dst, foldRune(r))
		i += size
	}
	return dst
}

// foldRune is the fold of one non-ASCII character (see FoldKey).
func foldRune(r rune) rune {
	if lo := unicode.ToLower(r); lo < utf8.RuneSelf {
		return asciiLower(lo)
	}
	if up := unicode.ToUpper(r); up < utf8.RuneSelf {
		return asciiLower(up)
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return asciiLower(f)
		}
		least = min(least, f)
	}
	return least
}

// Folded reports whether key is its own fold: no ASCII capital letter and
// no byte ≥ 0x80 (a fast path: FoldKey would copy it as it is).
func Folded[K string | []byte](key K) bool {
	for i := range len(key) {
		if c := key[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

func asciiLower(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}
