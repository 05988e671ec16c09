package jsonscan

import "testing"

// refSkipString is skipString byte by byte: the offset past the first quote
// after b[i] that is not escaped, -1 when b ends first.
func refSkipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipStringCases end at every offset of both word-sized windows and past
// them, after backslash runs of both parities, and not at all.
var skipStringCases = []string{
	`""`, `"a"`, `"abcdefg"`, `"abcdefgh"`, `"abcdefghi"`, `"abcdefghijklmno"`,
	`"abcdefghijklmnop"`, `"abcdefghijklmnopq"`, `"abcdefghijklmnopqrstuvwxyz0123456789"`,
	`"\""`, `"\\"`, `"ab\"cdefgh\\"x`, `"abcdefghijklmn\"p"q"`, `"\\\"\\\\"`,
	`"abc`, `"abcdefghijklmnopqrstu`, `"abcdefghijklmnop\"`, `"`, `"\`,
	"\"\xff\x80\"\"", "\"\x00\x7f\xde\xad\"",
}

// TestSkipStringMatchesBytewise checks skipString against refSkipString
// from every start quote of every case, and inside longer inputs.
func TestSkipStringMatchesBytewise(t *testing.T) {
	for _, tc := range skipStringCases {
		for _, pad := range []string{"", ",", "]}  more text \"quoted\"", "\"\""} {
			b := []byte(tc + pad)
			if got, want := skipString(b, 0), refSkipString(b, 0); got != want {
				t.Errorf("skipString(%q) = %d, want %d", b, got, want)
			}
		}
	}
}

// FuzzSkipString compares skipString with refSkipString on any input,
// from a quote at any offset.
func FuzzSkipString(f *testing.F) {
	for _, tc := range skipStringCases {
		f.Add([]byte(tc), uint8(0))
	}
	f.Add([]byte(`{"k":"abcdefghijklmnop\\","x":"y"}`), uint8(5))
	f.Fuzz(func(t *testing.T, b []byte, at uint8) {
		i := int(at)
		if i >= len(b) {
			return
		}
		b[i] = '"'
		if got, want := skipString(b, i), refSkipString(b, i); got != want {
			t.Fatalf("skipString(%q, %d) = %d, want %d", b, i, got, want)
		}
	})
}
