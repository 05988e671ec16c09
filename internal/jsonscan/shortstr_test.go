package jsonscan

import (
	"bytes"
	"testing"
)

// shortStrings are the bodies of the strings the scan's short-string
// paths see (keys and values whose closing quote lies within the 16 bytes
// after the opening one): every length to 18 bytes, with each byte that
// ends a plain run (a quote, a backslash opening an escape or not, a
// control character, bytes ≥ 0x80 valid as UTF-8 or not) or a capital at
// each place, in the first word after the quote or the second.
func shortStrings() [][]byte {
	var out [][]byte
	odd := [][]byte{{'"'}, []byte(`\n`), []byte(`\u0041`), []byte(`\x`), {'\\'}, {0x01}, {0x1f}, {0x7f},
		{0xc3, 0xa9}, {0xc3}, {0xff}, {'A'}, {'Z'}, {'@'}, {'['}}
	for n := range 19 {
		plain := bytes.Repeat([]byte{'k'}, n)
		out = append(out, plain)
		for at := range n {
			for _, c := range odd {
				s := append(append(append([]byte{}, plain[:at]...), c...), plain[at:]...)
				out = append(out, s)
			}
		}
	}
	return out
}

// TestShortStringsSameAsOld compares Check with the old scan on objects
// whose keys and string values are shortStrings, with room after them
// for both words of the short-string paths or not (the input's end
// within 16 bytes), and a second key that is the first in capitals, in
// lower case, or the same: what the key path's fold verdict decides
// (CaseVariantKey, DuplicateKey). Breaking the short-string paths of
// the value or the key (taking a stop byte other than a quote for the
// end, the wrong length, a fold verdict from one word) fails it.
func TestShortStringsSameAsOld(t *testing.T) {
	pad := []byte(`,"pad":"abcdefghijklmnopqrstuvwx"}`)
	for _, s := range shortStrings() {
		up, low := bytes.ToUpper(s), bytes.ToLower(s)
		docs := [][]byte{
			cat(`{"`, s, `":1`), cat(`{"a":"`, s, `"`), cat(`["`, s, `"`),
			cat(`{"`, s, `":1,"`, up, `":2`), cat(`{"`, s, `":1,"`, low, `":2`), cat(`{"`, s, `":1,"`, s, `":2`),
			cat(`{"`, up, `":"`, s, `","`, low, `":"`, s, `"`),
		}
		for _, d := range docs {
			closer := "}"
			if d[0] == '[' {
				closer = "]"
			}
			sameAsOld(t, cat(string(d), []byte(closer)), 0)
			sameAsOld(t, cat(string(d), pad[:len(pad)-1], closer), 0)
			sameAsOld(t, cat(string(d), pad[:len(pad)-1]), 0) // truncated
			sameAsOld(t, d, 0)
		}
	}
}

// TestKeyColonSameAsOld compares Check with the old scan on keys of
// every length to 18 bytes followed by their colon, whitespace and a
// colon, or a byte that is not one: the key path takes a colon right
// after the key itself (taking any other byte for one fails it).
func TestKeyColonSameAsOld(t *testing.T) {
	for n := range 19 {
		k := bytes.Repeat([]byte{'k'}, n)
		for _, sep := range []string{":", " :", "\t:", "\r\n :", "=", ";", "", ",", "}", " ", "::", "\"", "\\"} {
			d := cat(`{"`, k, `"`, sep, `1,"pad":"abcdefghijklmnopqrstuvwx"}`)
			for end := range len(d) + 1 {
				sameAsOld(t, d[:end], 0)
			}
		}
	}
}

// cat joins a string and byte slices or strings into one new slice.
func cat(first string, rest ...any) []byte {
	b := []byte(first)
	for _, r := range rest {
		switch r := r.(type) {
		case string:
			b = append(b, r...)
		case []byte:
			b = append(b, r...)
		}
	}
	return b
}
