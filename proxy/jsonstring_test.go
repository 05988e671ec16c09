package proxy

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzAppendJSONString: the output is always valid JSON, and decodes to s
// itself when s is valid UTF-8 (each invalid byte to U+FFFD otherwise).
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\s", "\x00\x07\x1f\x7f", "é\xff\xfe", "\u2028", "\xc3", strings.Repeat("é", 101)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("appendJSONString(%q) = %s: %v", s, b, err)
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); utf8.ValidString(s) && got != s || !utf8.ValidString(s) && len([]rune(got)) < len([]rune(want)) {
			t.Fatalf("appendJSONString(%q) decodes to %q", s, got)
		}
	})
}

// FuzzQueryNamesModel against a plain oracle: decode each %XX once, lower
// the case, look for "model".
func FuzzQueryNamesModel(f *testing.F) {
	for _, s := range []string{"model=x", "api-version=1", "mod%65l=x", "MoDeL", "mmodel", "modmodel", "%4d%4F%44%45%4C", "mode", "%zzmodel"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		var d strings.Builder
		for i := 0; i < len(q); i++ {
			if q[i] == '%' && i+2 < len(q) && unhexable(q[i+1]) && unhexable(q[i+2]) {
				d.WriteByte(unhex(q[i+1])<<4 | unhex(q[i+2]))
				i += 2
				continue
			}
			d.WriteByte(q[i])
		}
		lower := []byte(d.String())
		for i, c := range lower {
			if 'A' <= c && c <= 'Z' {
				lower[i] = c + 'a' - 'A'
			}
		}
		if want := strings.Contains(string(lower), "model"); queryNamesModel([]byte(q)) != want {
			t.Fatalf("queryNamesModel(%q) = %v, want %v", q, !want, want)
		}
	})
}
