package weigher

import (
	"math/rand/v2"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// textMemoTexts are short texts for the text memo: a tools list's
// property texts, each in variants of one length that differ in a byte
// textSlot does not read (bytes 8 to 15 of a 40-byte text: the same
// slot), so that a slot found by length alone, or by the bytes the hash
// reads, would give one variant another's count; and texts of 2, 8, 16,
// 17 and 48 bytes, the bounds of textSlot's loads and of the memo.
func textMemoTexts() []string {
	texts := []string{
		"query:string:Words to search for", "top_k:integer:", "path:string:", "minimum:1",
		"ok", "Continue", "0123456789abcdef", "0123456789abcdefg",
		"Hello, world! Hello, world! Hello, world! Hello!",
		// A CJK run whose piece is cut (cutMerge), leaving its segment
		// "限制预算本月请求" in the memo marked as a piece, then that segment
		// as a text of its own: it finds the piece's slot.
		"请求响应速率限制预算本月请求响应速率限制", "限制预算本月请求",
	}
	base := []byte("The limits: wordsxxxx of the quick fox..")
	for _, c := range []byte{'a', ' ', '7', '.', 'Z', '\n', 0xe4} {
		v := append([]byte(nil), base...)
		for i := 8; i < 16; i += 3 {
			v[i] = c
		}
		texts = append(texts, string(v))
	}
	return texts
}

// TestTextMemoSameCounts: a memoCounter counting short texts again and
// again, in an order that makes texts of one length share slots, gives
// each the count of its counter (checked against tiktoken-go by
// TestBPECounterMatchesTiktoken), and its text memo finds counts
// (a repeated text is not counted again) and holds texts that share a
// slot and a length but not their bytes or counts: the case a slot
// compared by length or by the hashed words alone would get wrong.
func TestTextMemoSameCounts(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	r := rand.New(rand.NewPCG(5, 6))
	texts := textMemoTexts()
	for range 3000 {
		s := randomText(r, 1+r.IntN(16))
		if len(s) > textMemoBytes {
			s = s[:textMemoBytes]
		}
		texts = append(texts, s)
	}
	for _, c := range shortTextCounters(t) {
		mc := c.takeMemo()
		mc.memo.texts = textMemo{}
		want := make(map[string]int64, len(texts))
		for _, s := range texts {
			want[s] = c.count(s)
		}
		sharedSlot, hits := 0, 0
		for i := range 4 * len(texts) {
			s := texts[i%len(texts)]
			if i >= len(texts) {
				s = texts[r.IntN(len(texts))]
			}
			if len(s) >= 2 && len(s) <= textMemoBytes {
				sl := &mc.memo.texts.slots[textSlot(s)]
				held := "" // a piece's slot (textMemoPiece) holds no text
				if sl.n&textMemoPiece == 0 {
					held = string(sl.text[:sl.n])
				}
				if int(sl.n) == len(s) && held != s && want[held] != want[s] {
					sharedSlot++
				} else if held == s {
					hits++
				}
			}
			if got := countText(mc, s); got != want[s] {
				t.Fatalf("o200k %v: text %d: countText(memoCounter, %q) = %d, counter %d", c.o200k, i, s, got, want[s])
			}
		}
		c.putMemo(mc)
		if sharedSlot == 0 || hits == 0 {
			t.Fatalf("o200k %v: %d texts met a slot holding another of their length and a different count, %d found their own: the test no longer exercises the memo", c.o200k, sharedSlot, hits)
		}
	}
}

// FuzzTextMemoSameCounts: a text, the same text with byte at changed to
// b (one length: often one slot), then the first again, counted by one
// memoCounter, get their counter's counts.
func FuzzTextMemoSameCounts(f *testing.F) {
	for i, s := range textMemoTexts() {
		f.Add(s, uint8(i+8), byte('a'+i))
	}
	cs := shortTextCounters(f)
	f.Fuzz(func(t *testing.T, a string, at uint8, b byte) {
		v := []byte(a)
		if len(v) > 0 {
			v[int(at)%len(v)] = b
		}
		for _, c := range cs {
			mc := c.takeMemo()
			for _, s := range []string{a, string(v), a, string(v)} {
				if got, want := countText(mc, s), c.count(s); got != want {
					t.Fatalf("o200k %v: countText(memoCounter, %q) = %d, counter %d", c.o200k, s, got, want)
				}
			}
			c.putMemo(mc)
		}
	})
}

// TestTextMemoKeepsPiecesApart: the text memo holds both texts (countIn's
// counts, pre-tokenized) and segments of long pieces (segmentTokens'
// merges, not); the same bytes counted both ways, in turn, by one
// memoCounter get each way's count. Random texts, of which the two
// counts differ for some (a merge alone may join across the pieces the
// pre-tokenizer splits).
func TestTextMemoKeepsPiecesApart(t *testing.T) {
	texts := []string{
		"hello world, this is a test!", "query:string:Words to search for",
		"请求响应速率限制预算本月", "the the the the the the",
	}
	r := rand.New(rand.NewPCG(7, 8))
	for len(texts) < 400 {
		if s := randomText(r, 4+r.IntN(12)); len(s) >= 17 && len(s) <= textMemoBytes {
			texts = append(texts, s)
		}
	}
	for _, c := range shortTextCounters(t) {
		differ := 0
		for _, s := range texts {
			text := c.count(s)
			piece := c.mergeTokens(s)
			if text != piece {
				differ++
			}
			mc := c.takeMemo()
			mc.memo.texts = textMemo{}
			for round := range 2 {
				if got := c.segmentTokens(&mc.memo, s, 0, len(s)); got != piece {
					t.Fatalf("o200k %v: round %d: segmentTokens(%q) = %d, its merge %d", c.o200k, round, s, got, piece)
				}
				if got := countText(mc, s); got != text {
					t.Fatalf("o200k %v: round %d: countText(memoCounter, %q) = %d, counter %d", c.o200k, round, s, got, text)
				}
			}
			c.putMemo(mc)
		}
		if differ == 0 {
			t.Fatalf("o200k %v: no text counts differently as a piece: the test shows nothing", c.o200k)
		}
	}
}
