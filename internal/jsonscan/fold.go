package jsonscan

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
// no byte ≥ 0x80 (a fast path: FoldKey would copy it as it is). It tests
// eight bytes at a time (foldedWord): a key of 4 to 8 bytes in one word
// made of its first and last four, a longer one word by word and the last
// eight, overlapping; one of 3 bytes or fewer byte by byte. Where a byte
// at a time cost a key about 7 instructions a byte (a warm 1 KiB chat
// body about 1,000 instructions, with the weigher's field check), a key
// costs a few loads and compares (TestFoldedSameAsOld, FuzzFoldedSameAsOld:
// the byte-wise loop, internal/oldscan's, is the reference).
func Folded[K string | []byte](key K) bool {
	n := len(key)
	switch {
	case n >= 8:
		for i := 0; i+8 < n; i += 8 {
			if !foldedWord(load64(key, i)) {
				return false
			}
		}
		return foldedWord(load64(key, n-8))
	case n >= 4:
		return foldedWord(uint64(load32(key, 0)) | uint64(load32(key, n-4))<<32)
	}
	for i := range n {
		if c := key[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// foldedWord reports whether none of the eight bytes of w is ≥ 0x80 or an
// ASCII capital. With every byte below 0x80, adding 0x3f sets a byte's top
// bit exactly when it is at least 'A', and adding 0x25 exactly when it is
// above 'Z', with no carry into the next byte (each sum stays below 0x100).
func foldedWord(w uint64) bool {
	const ones, high = 0x0101010101010101, 0x8080808080808080
	if w&high != 0 {
		return false
	}
	return (w+ones*(0x80-'A'))&^(w+ones*(0x80-'Z'-1))&high == 0
}

// load64 is the eight bytes of key from i, little-endian.
func load64[K string | []byte](key K, i int) uint64 {
	k := key[i : i+8]
	return uint64(k[0]) | uint64(k[1])<<8 | uint64(k[2])<<16 | uint64(k[3])<<24 |
		uint64(k[4])<<32 | uint64(k[5])<<40 | uint64(k[6])<<48 | uint64(k[7])<<56
}

// load32 is the four bytes of key from i, little-endian.
func load32[K string | []byte](key K, i int) uint32 {
	k := key[i : i+4]
	return uint32(k[0]) | uint32(k[1])<<8 | uint32(k[2])<<16 | uint32(k[3])<<24
}

func asciiLower(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}
