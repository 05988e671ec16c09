package weigher

import "testing"

// validText must give the very string the rune conversion gave, which
// every count of invalid UTF-8 (and the golden tables behind it) assumes.
func TestValidTextIsTheRuneConversion(t *testing.T) {
	for _, s := range []string{"", "ok", "a\xffb", "\xff\xfe", "é\xc3", "\xe4\xb8", "中\x80文", "\xf0\x9f\x98", "\xed\xa0\x80", "\xef\xbf\xbd\xff"} {
		if got, want := validText(s), string([]rune(s)); got != want {
			t.Errorf("validText(%q) = %q, want %q", s, got, want)
		}
	}
}

func FuzzValidText(f *testing.F) {
	for _, s := range []string{"", "a\xffb", "中\x80文", "\xf0\x9f\x98", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validText(s), string([]rune(s)); got != want {
			t.Fatalf("validText(%q) = %q, want %q", s, got, want)
		}
	})
}
