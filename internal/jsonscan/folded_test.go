package jsonscan

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/jsonscan/internal/oldscan"
)

// foldedSameAsOld fails t unless Folded answers for key, as a string and
// as bytes, what the byte-wise loop of the frozen scan (oldscan) answers,
// and for every suffix of key (every length and alignment of the words).
func foldedSameAsOld(t *testing.T, key string) {
	t.Helper()
	for i := range len(key) + 1 {
		k := key[i:]
		want := oldscan.Folded(k)
		if got := Folded(k); got != want {
			t.Fatalf("Folded(%q) = %v, old %v", k, got, want)
		}
		if got := Folded([]byte(k)); got != want {
			t.Fatalf("Folded([]byte(%q)) = %v, old %v", k, got, want)
		}
	}
}

// foldedCases put a capital, a byte ≥ 0x80 or a byte next to the capitals
// ('@', '[', '`', '{') at every place of keys of 1 to 24 bytes.
func foldedCases() []string {
	var keys []string
	for _, c := range []string{"A", "Z", "M", "@", "[", "`", "{", "a", "z", "\x7f", "\x80", "\xff", "é", "K"} {
		for n := 1; n <= 24; n++ {
			for at := range n {
				keys = append(keys, strings.Repeat("x", at)+c+strings.Repeat("y", n-at-1))
			}
		}
	}
	return append(keys, "", "role", "content", "tool_call_id", "max_completion_tokens", "MAX_TOKENS", "Model")
}

// TestFoldedSameAsOld: the word-wise Folded against the byte-wise one on
// keys with each kind of byte at each place.
func TestFoldedSameAsOld(t *testing.T) {
	for _, k := range foldedCases() {
		foldedSameAsOld(t, k)
	}
}

// FuzzFoldedSameAsOld: the word-wise Folded against the byte-wise one on
// the fuzzer's keys.
func FuzzFoldedSameAsOld(f *testing.F) {
	for _, k := range foldedCases() {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		foldedSameAsOld(t, key)
	})
}
