package weigher

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/pkoukk/tiktoken-go"

	"github.com/llmguard/llmguard/internal/nativetest"
)

var (
	refOnce sync.Once
	refs    map[string]tiktokenCounter
)

// reference returns tiktoken-go's own encoder for encoding, the oracle the
// fast counter is checked against.
func reference(tb testing.TB, encoding string) tiktokenCounter {
	tb.Helper()
	refOnce.Do(func() {
		useOfflineVocabularies()
		refs = map[string]tiktokenCounter{}
		for _, e := range []string{EncodingO200k, EncodingCL100k} {
			t, err := tiktoken.GetEncoding(e)
			if err != nil {
				tb.Fatalf("tiktoken.GetEncoding(%q): %v", e, err)
			}
			refs[e] = tiktokenCounter{t}
		}
	})
	return refs[encoding]
}

// pieces is an alphabet that exercises every branch of both split patterns:
// cases (Lu, Ll, Lt, Lm, Lo), marks, digits of several scripts, ASCII and
// Unicode whitespace, newlines, slashes, apostrophe contractions, symbols,
// emoji and invalid UTF-8.
var pieces = []string{
	"a", "Z", "hello", "World", "HTTP", "McDonald", "ǅ", "ʰ", "中", "文字", "é", "e\u0301", "\u0301", "\u0903",
	"0", "42", "1234567", "٣", "Ⅻ", "½",
	" ", "  ", "\t", "\n", "\r\n", "\n\n", " \n ", "\u00a0", "\u3000", "\u0085", "\u2028", "\v", "\f",
	"'", "'s", "'S", "'t", "'re", "'VE", "'m", "'ll", "'d", "'x", "'l",
	".", ",", "!", "?", "...", "/", "//", "\\", "-", "—", "«", "→", "{", "}", "\"", "#", "$", "<|endoftext|>",
	"😀", "👍🏽", "\xff", "\xe4\xb8", "\x00",
}

func randomText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func TestBPECounterMatchesTiktoken(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	w := testWeigher(t)
	fixed := []string{
		"tiktoken is great!", "お誕生日おめでとう", "Hello, world! It's 2024; we're   here.\n\n  Indented\tcode();\r\n",
		"I'M SHOUTING DON'T", "camelCaseAndPascalCase XMLHttpRequest", "path/to/file.go\n//comment\n",
		"   trailing   ", "\n", " ", "", "$100.00 + 7% = ?", "naïve café résumé", "Ünïcödé ÀÉÎ", "ǅemal ǈ",
		strings.Repeat("ab", 300), cookbookMessages, cookbookTools,
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		fixed = append(fixed, randomText(r, 1+r.IntN(12)))
	}
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		fast, ref := w.encoders[enc], reference(t, enc)
		bad := 0
		for _, s := range fixed {
			if got, want := fast.count(s), ref.count(s); got != want {
				t.Errorf("%s: count(%q) = %d, tiktoken-go says %d", enc, s, got, want)
				if bad++; bad > 10 {
					t.FailNow()
				}
			}
		}
	}
}

func FuzzBPECounter(f *testing.F) {
	for _, s := range []string{"tiktoken is great!", "I'M HERE'S", "a\u0301\u0301b", " \n\t x", "٣٣٣٣", "ǅǅa'LL"} {
		f.Add(s)
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, s string) {
		// tiktoken-go's regexp2 patterns backtrack badly on some inputs (29
		// bytes of U+FFFD runs took 0.4 s), so the oracle only sees short
		// strings.
		if len(s) > 48 {
			s = s[:48]
		}
		for _, enc := range []string{EncodingO200k, EncodingCL100k} {
			if got, want := w.encoders[enc].count(s), reference(t, enc).count(s); got != want {
				t.Errorf("%s: count(%q) = %d, tiktoken-go says %d", enc, s, got, want)
			}
		}
	})
}
