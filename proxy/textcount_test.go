package proxy

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// mixedText is text of every shape a model streams: prose, runs of spaces,
// blank lines, CRLF, indented code, numbers, punctuation, a language
// written without spaces, emoji, and Unicode spaces.
func mixedText(paragraphs int) string {
	shapes := []string{
		"The token bucket refills at a steady rate, and admits a burst up to its capacity. ",
		"Two  spaces   here,\tand a tab.\n\n",
		"func main() {\n\tfmt.Println(\"hi\")\n    return 42\n}\n",
		"Line one\r\nLine two\r\n",
		"Costs: 1234567.89 USD, 3.14159, 2026-12-01; ok?! ...\n",
		"速率限制器按照固定速率补充令牌并允许一定的突发流量这是一个没有空格的句子",
		" 🙂🙂 emoji\u00a0and\u2003unicode\u00a0 spaces \n",
		"  - item\n  - item two\n",
		"It's what they'd've said, isn't it? ",
	}
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for range paragraphs {
		b.WriteString(shapes[r.IntN(len(shapes))])
	}
	return b.String()
}

// TestSafeCutCountsAsTheWhole: counting the text before and after a safe cut
// apart gives the count of the whole, with each encoding llmguard counts
// in, at every safe cut of a mixed text.
func TestSafeCutCountsAsTheWhole(t *testing.T) {
	w := testWeigher(t)
	text := mixedText(60)
	for _, model := range []string{"gpt-4o-mini", "gpt-4", "claude-sonnet-4-5"} {
		whole := w.CountText(model, text)
		cuts := 0
		for end := len(text); end > 0; {
			cut := safeCut([]byte(text[:end]))
			if cut <= 0 {
				break
			}
			if got := w.CountText(model, text[:cut]) + w.CountText(model, text[cut:]); got != whole {
				t.Fatalf("%s: cut at %d (%q|%q): %d tokens apart, %d whole", model, cut,
					text[max(0, cut-12):cut], text[cut:min(len(text), cut+12)], got, whole)
			}
			cuts++
			end = cut
		}
		if cuts < 100 {
			t.Errorf("%s: only %d safe cuts in %d bytes", model, cuts, len(text))
		}
	}
}

// TestSafeCutSymbols checks safe cuts in short strings of symbols,
// newlines and slashes, where o200k_base's symbol pieces run on past a
// newline into a slash ("*\n/" is one piece): cutting there would count
// less than the whole.
func TestSafeCutSymbols(t *testing.T) {
	w := testWeigher(t)
	alphabet := []string{" ", "\n", "\r\n", "/", "//", "*", ".", "'", "-", "B", "a", "é", "1", "\t"}
	r := rand.New(rand.NewPCG(7, 8))
	texts := []string{" B-\n. /'\n/*", "*/.a''\r\n/' é", "*\n/*\n/*\n/"}
	for range 3000 {
		var b strings.Builder
		for range 3 + r.IntN(20) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	checked := 0
	for _, text := range texts {
		cut := safeCut([]byte(text))
		if cut <= 0 {
			continue
		}
		checked++
		for _, model := range []string{"gpt-4o-mini", "gpt-4"} {
			if got, whole := w.CountText(model, text[:cut])+w.CountText(model, text[cut:]), w.CountText(model, text); got != whole {
				t.Fatalf("%s: cut %q|%q: %d tokens apart, %d whole", model, text[:cut], text[cut:], got, whole)
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d of %d texts had a safe cut", checked, len(texts))
	}
}

// TestPendingTextCountsAsTheWhole streams about 1 MiB of mixed text in
// deltas of random sizes (cut anywhere, even inside a character) and checks
// that the tokens counted in pieces, as the tap counts them, are at least
// the count of the whole text and within a token per forced cut of it;
// prose with spaces counts exactly.
func TestPendingTextCountsAsTheWhole(t *testing.T) {
	w := testWeigher(t)
	mixed := mixedText(20000)
	prose := strings.Repeat("The bucket refills at a steady rate.\nIt admits bursts,  and denies the rest. ", 12000)
	for _, tc := range []struct {
		name, text string
		exact      bool
	}{{"mixed", mixed, false}, {"prose", prose, true}} {
		for _, model := range []string{"gpt-4o-mini", "gpt-4"} {
			for _, countAt := range []int{tapTextMax, tapCountEvery} {
				calls := 0
				p := pendingText{countAt: countAt, count: func(s string) int64 { calls++; return w.CountText(model, s) }}
				r := rand.New(rand.NewPCG(3, 4))
				for s := tc.text; len(s) > 0; {
					n := min(len(s), 1+r.IntN(300))
					p.add(s[:n])
					s = s[n:]
					if len(p.buf) > tapTextMax {
						t.Fatalf("held %d bytes", len(p.buf))
					}
				}
				got, whole := p.tokens(), w.CountText(model, tc.text)
				if got < whole || (tc.exact && got != whole) || got > whole+int64(calls) {
					t.Errorf("%s, %s, counting every %d bytes: %d tokens in %d pieces, %d in the whole", tc.name, model, countAt, got, calls, whole)
				}
			}
		}
	}
}
