package weigher

import (
	"strings"
	"testing"
)

// containsFoldASCIIBytewise is the byte-at-a-time search containsAdvisorFold
// replaced, kept as its reference: whether s holds word (lower-case ASCII
// letters) in any ASCII case.
func containsFoldASCIIBytewise(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		j := 0
		for j < len(word) && s[i+j]|0x20 == word[j] {
			j++
		}
		if j == len(word) {
			return true
		}
	}
	return false
}

// TestContainsAdvisorFoldSameAsBytewise compares the word-at-a-time search
// with the byte-at-a-time one on the word in every case and at every
// offset of words of 0 to 24 bytes (both loops, and a word across the
// 8-byte boundary), on near misses, and on the bytes that fold to a
// letter only by their 0x20 bit ('V'^0x20 is 'v', 0x16|0x20 is 0x36).
func TestContainsAdvisorFoldSameAsBytewise(t *testing.T) {
	cases := []string{"", "v", "V", "advisor", "ADVISOR", "AdViSoR", "advisr", "adviso", "dvisor",
		"a\x44visor", "ad\x56isor", "ad\x16isor", "\x01\x00vvvv\x01advisoradvisor", "vvvvvvvvvvvvvvvvv",
		`{"type":"openrouter:advisor"}`, `[{"type":"function"},{"type":"advisor_20260301"}]`,
		"AdvisoR" + strings.Repeat("x", 9), "\xc3\xa1dvisor", "adv\xc4\xb1sor"}
	for pad := 0; pad <= 17; pad++ {
		for _, w := range []string{"advisor", "ADVISOR", "aDvIsOr", "advisoq", "adwisor"} {
			for tail := 0; tail <= 9; tail++ {
				cases = append(cases, strings.Repeat("\x01", pad)+w+strings.Repeat("V", tail))
				cases = append(cases, strings.Repeat("v", pad)+w[:max(0, len(w)-tail%3)])
			}
		}
	}
	// Past maxAdvisorHits 'v's and 'V's the search goes a word at a
	// time: the word before, among and after them, in either case.
	many := strings.Repeat("v", maxAdvisorHits/2) + strings.Repeat("V", maxAdvisorHits/2+1)
	for _, w := range []string{"advisor", "ADVISOR", "adVisor", "advisr"} {
		cases = append(cases, many+w, w+many, many[:9]+w+many[9:], many+w+many, "x"+many+"adv"+many+"isor")
	}
	for _, s := range cases {
		if got, want := containsAdvisorFold(s), containsFoldASCIIBytewise(s, "advisor"); got != want {
			t.Errorf("containsAdvisorFold(%q) = %v, the byte-at-a-time search %v", s, got, want)
		}
		if got, want := containsAdvisorWords(s), containsFoldASCIIBytewise(s, "advisor"); got != want {
			t.Errorf("containsAdvisorWords(%q) = %v, the byte-at-a-time search %v", s, got, want)
		}
	}
}

// FuzzContainsAdvisorFold compares the word-at-a-time search with the
// byte-at-a-time one on any bytes.
func FuzzContainsAdvisorFold(f *testing.F) {
	for _, s := range []string{"advisor", "xxADVISORxx", "0123456adViSor", "vvvvvvvvvvv", "\x01\x00advisor"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := containsFoldASCIIBytewise(s, "advisor")
		if got := containsAdvisorFold(s); got != want {
			t.Fatalf("containsAdvisorFold(%q) = %v, the byte-at-a-time search %v", s, got, want)
		}
		if got := containsAdvisorWords(s); got != want {
			t.Fatalf("containsAdvisorWords(%q) = %v, the byte-at-a-time search %v", s, got, want)
		}
	})
}
