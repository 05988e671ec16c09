package jsonscan

import (
	"encoding/json"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestFoldKeyCoversEncodingJSON: every key that Go's encoding/json matches
// to a field of another spelling folds to that field's name, so a body that
// a Go upstream reads with a case variant is always caught. It walks every
// character whose encoding/json fold is an ASCII letter and decodes it for
// real.
func TestFoldKeyCoversEncodingJSON(t *testing.T) {
	found := 0
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		g := goFold(r)
		if g >= utf8.RuneSelf || !unicode.IsLetter(g) {
			continue
		}
		found++
		field := string(asciiLower(g))
		if got := string(FoldKey(nil, []byte(string(r)))); got != field {
			t.Errorf("FoldKey(%U) = %q, want %q (encoding/json matches it to %q)", r, got, field, field)
		}
		// encoding/json really reads the character as the letter.
		dst := struct {
			A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q, R, S, T, U, V, W, X, Y, Z int
		}{}
		if err := json.Unmarshal([]byte(`{"`+string(r)+`":7}`), &dst); err != nil {
			t.Fatal(err)
		}
		if dst == (struct {
			A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q, R, S, T, U, V, W, X, Y, Z int
		}{}) {
			t.Errorf("encoding/json did not match %U to a field: the premise changed", r)
		}
	}
	if found < 2 { // K (U+212A), ſ (U+017F) at least
		t.Errorf("only %d non-ASCII characters fold to ASCII letters in encoding/json", found)
	}
	for _, tc := range []struct{ in, want string }{
		{"MAX_TOKENS", "max_tokens"},
		{"Max_Tokens", "max_tokens"},
		{"max_to\u212aens", "max_tokens"},
		{"\u017ftream", "stream"},
		{"\u0130nput", "input"}, // Java's equalsIgnoreCase, not Go's
		{"\u0131nput", "input"},
		{"ÉTÉ", string(FoldKey(nil, []byte("été")))},
		{"n\xff", "n\xff"},
	} {
		if got := string(FoldKey(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("FoldKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// goFold is encoding/json's fold of one character (encoding/json/fold.go):
// the smallest member of its simple case-folding orbit.
func goFold(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}
