package weigher

import (
	"strings"
	"testing"
)

// countViaPieces is bpeCounter.count as it was before its short-text
// path: every text through countPieces and its piece memo (the reference).
func countViaPieces(c *bpeCounter, text string) int64 {
	n, _, ok := c.countPieces(text, 0, len(text), true)
	if !ok {
		text = string([]rune(text))
		n, _, _ = c.countPieces(text, 0, len(text), false)
	}
	return n
}

// shortTextCases are roles, names, words and the texts around them that the
// pre-tokenizer cuts in two or more pieces: spaces, digits, punctuation,
// contractions, capitals, newlines, non-ASCII text and invalid UTF-8
// ("00000000" is 3 tokens in pieces of three digits, 4 merged whole).
var shortTextCases = []string{
	"", "a", "user", "assistant", "system", "tool", "developer", "search_docs", "get_weather",
	" user", "user ", "User", "USER", "uSer", "user\n", "\n\nuser", "user's", "it's", "'s",
	"12345", "123456789", "00000000", "0000000000000000", "a1b2", "x=1", "f(x)", "::", "...", "  ", "\t\t", "\r\n",
	"héllo", "日本語", "こんにちは", "emoji😀", "\xff", "a\xffb", "\xe6\x97", "ab\xe6\x97\xa5",
	"sixteen_bytes_ok", "seventeen_bytes_x", "assistant_v2", "tool_call_12345",
	strings.Repeat("a", 16), strings.Repeat("ab", 8), strings.Repeat(" ", 16),
}

// shortTextCounters are the fast counters (o200k_base, cl100k_base).
func shortTextCounters(tb testing.TB) []*bpeCounter {
	w := testWeigher(tb)
	var cs []*bpeCounter
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		c, ok := w.encoders[enc].(*bpeCounter)
		if !ok {
			tb.Fatalf("%s: not the fast counter", enc)
		}
		cs = append(cs, c)
	}
	return cs
}

// TestShortTextSameAsPieces: count's one-piece path for short texts gives
// the count the piece walk with its memo gives.
func TestShortTextSameAsPieces(t *testing.T) {
	for _, c := range shortTextCounters(t) {
		for _, s := range shortTextCases {
			if got, want := c.count(s), countViaPieces(c, s); got != want {
				t.Errorf("o200k %v: count(%q) = %d, pieces %d", c.o200k, s, got, want)
			}
		}
	}
}

// FuzzShortTextSameAsPieces: the same on any text.
func FuzzShortTextSameAsPieces(f *testing.F) {
	for _, s := range shortTextCases {
		f.Add(s)
	}
	cs := shortTextCounters(f)
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range cs {
			if got, want := c.count(s), countViaPieces(c, s); got != want {
				t.Fatalf("o200k %v: count(%q) = %d, pieces %d", c.o200k, s, got, want)
			}
		}
	})
}
