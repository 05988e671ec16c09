package weigher

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// scanMerge is tiktoken's byte-pair merge as pieceTokens runs it on short
// pieces (lowest rank first by a linear scan), for any length: the oracle
// of heapMerge.
func scanMerge(c *bpeCounter, p string) int64 {
	type part struct{ start, rank int }
	parts := make([]part, 0, len(p)+1)
	for i := 0; i <= len(p); i++ {
		parts = append(parts, part{i, math.MaxInt})
	}
	rank := func(i, skip int) int {
		if i+skip+2 < len(parts) {
			if r, ok := c.ranks.get(p[parts[i].start:parts[i+skip+2].start]); ok {
				return r
			}
		}
		return math.MaxInt
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = rank(i, 0)
	}
	for len(parts) > 1 {
		minRank, i := math.MaxInt, -1
		for k := 0; k < len(parts)-1; k++ {
			if parts[k].rank < minRank {
				minRank, i = parts[k].rank, k
			}
		}
		if i < 0 {
			break
		}
		parts[i].rank = rank(i, 1)
		if i > 0 {
			parts[i-1].rank = rank(i-1, 1)
		}
		parts = append(parts[:i+1], parts[i+2:]...)
	}
	return int64(len(parts) - 1)
}

// TestHeapMergeMatchesScan: the heap merge of long pieces makes the same
// merges as tiktoken's scan, on pieces that merge a lot (runs of one
// letter, random letters, CJK, emoji bytes, random bytes of a small
// alphabet) and a little (random bytes).
func TestHeapMergeMatchesScan(t *testing.T) {
	w := testWeigher(t)
	r := rand.New(rand.NewPCG(7, 8))
	alphabets := []string{"a", "ab", "abcdefghijklmnopqrstuvwxyz", "速率限制器在每个日历周期", "😀👍🏽🚀🔥", " \n", "=-", "\x00\xff\x80"}
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		c := w.encoders[enc].(*bpeCounter)
		for n := range 400 {
			alpha := alphabets[n%len(alphabets)]
			var b strings.Builder
			size := shortPiece + 1 + r.IntN(600)
			for b.Len() < size {
				if n%3 == 0 {
					b.WriteByte(byte(r.Uint32()))
				} else {
					b.WriteByte(alpha[r.IntN(len(alpha))])
				}
			}
			p := b.String()
			if got, want := c.heapMerge(p), scanMerge(c, p); got != want {
				t.Fatalf("%s: heapMerge(%q) = %d, scan says %d", enc, p, got, want)
			}
		}
	}
}

// TestLongRunsMatchTiktoken: long runs counted through the heap merge agree
// with tiktoken-go itself.
func TestLongRunsMatchTiktoken(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	w := testWeigher(t)
	r := rand.New(rand.NewPCG(9, 10))
	var texts []string
	for range 20 {
		b := make([]byte, 60+r.IntN(200))
		for i := range b {
			b[i] = byte('a' + r.IntN(26))
		}
		texts = append(texts, string(b), strings.Repeat("速率限制", 5+r.IntN(20)), strings.Repeat("😀🔥", 5+r.IntN(30)))
	}
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		fast, ref := w.encoders[enc], reference(t, enc)
		for _, s := range texts {
			if got, want := fast.count(s), ref.count(s); got != want {
				t.Errorf("%s: count(%q) = %d, tiktoken-go says %d", enc, s, got, want)
			}
		}
	}
}

// TestRankTable: every token of both vocabularies is found with its rank,
// and strings that are not tokens are not.
func TestRankTable(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	useOfflineVocabularies()
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		c, err := newCounter(enc)
		if err != nil {
			t.Fatal(err)
		}
		table := c.(*bpeCounter).ranks
		src, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(enc + ".tiktoken")
		if err != nil {
			t.Fatal(err)
		}
		for tok, want := range src {
			if got, ok := table.get(tok); !ok || got != want {
				t.Fatalf("%s: get(%q) = %d, %v; want %d", enc, tok, got, ok, want)
			}
		}
		// Near misses of 4-to-16-byte tokens (those get packs from word
		// loads): the last byte changed.
		misses := 0
		for tok := range src {
			if len(tok) >= 4 && len(tok) <= 16 {
				near := tok[:len(tok)-1] + string(rune(tok[len(tok)-1]^0x5a)&0x7f)
				if _, ok := src[near]; !ok {
					if r, ok := table.get(near); ok {
						t.Fatalf("%s: get(%q) = %d, not a token", enc, near, r)
					}
					misses++
				}
			}
		}
		if misses < 1000 {
			t.Fatalf("%s: only %d near misses of 4-to-16-byte tokens checked", enc, misses)
		}
		for _, s := range []string{"", "\x00\x00\x00\x00\x00\x00\x00\x00\x00", "zqxjzqxj", "zqxjzqxjzqxj", "qqqqqqqqqqqqqqqq", "qqqqqqqqqqqqqqqqqqqqqqq"} {
			if _, ok := src[s]; ok {
				continue
			}
			if r, ok := table.get(s); ok {
				t.Errorf("%s: get(%q) = %d, not a token", enc, s, r)
			}
		}
	}
}

func FuzzHeapMerge(f *testing.F) {
	for _, s := range []string{strings.Repeat("a", 100), strings.Repeat("速率", 20), "thequickbrownfoxjumpsoverthelazydogthequickbrownfox"} {
		f.Add(s)
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, p string) {
		if len(p) < 2 || len(p) > 2000 {
			return
		}
		for _, enc := range []string{EncodingO200k, EncodingCL100k} {
			c := w.encoders[enc].(*bpeCounter)
			if got, want := c.heapMerge(p), scanMerge(c, p); got != want {
				t.Fatalf("%s: heapMerge(%q) = %d, scan says %d", enc, p, got, want)
			}
		}
	})
}

// TestInRankOrder: tokens come out by rank, whether placed by rank (dense,
// distinct ranks) or sorted (gaps, a repeated rank).
func TestInRankOrder(t *testing.T) {
	for _, ranks := range []map[string]int{
		{"c": 2, "a": 0, "b": 1},
		{"z": 100, "y": 1},
		{"b": 1, "a": 1, "c": 0},
		{"q": 5, "r": -1, "s": 3},
	} {
		got := inRankOrder(ranks)
		if len(got) != len(ranks) {
			t.Fatalf("%v: %d tokens out, want %d", ranks, len(got), len(ranks))
		}
		for i, e := range got {
			if ranks[e.tok] != e.rank {
				t.Fatalf("%v: %q given rank %d", ranks, e.tok, e.rank)
			}
			if i > 0 && (got[i-1].rank > e.rank || got[i-1].rank == e.rank && got[i-1].tok > e.tok) {
				t.Fatalf("%v: out of order: %v", ranks, got)
			}
		}
	}
}

// TestRankOfSameAsGet: rankOf, heapMerge's lookup, gives get's answer for
// every token of both vocabularies of 2 to 24 bytes, placed inside a longer
// string (its loads reach past the token's ends only within it), for the
// same tokens with their last byte changed, and for random strings.
func TestRankOfSameAsGet(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	useOfflineVocabularies()
	r := rand.New(rand.NewPCG(11, 12))
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		c, err := newCounter(enc)
		if err != nil {
			t.Fatal(err)
		}
		table := c.(*bpeCounter).ranks
		src, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(enc + ".tiktoken")
		if err != nil {
			t.Fatal(err)
		}
		check := func(s string) {
			want := int32(-1)
			if rank, ok := table.get(s); ok {
				want = int32(rank)
			}
			for _, pad := range []string{"", "xy"} {
				p := pad + s + pad
				if got := table.rankOf(p, len(pad), len(pad)+len(s)); got != want {
					t.Fatalf("%s: rankOf(%q in %q) = %d, get says %d", enc, s, p, got, want)
				}
			}
		}
		for tok := range src {
			if len(tok) < 2 || len(tok) > 24 {
				continue
			}
			check(tok)
			check(tok[:len(tok)-1] + string(tok[len(tok)-1]^0x21))
		}
		for range 100000 {
			b := make([]byte, 2+r.IntN(10))
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			check(string(b))
		}
	}
}
