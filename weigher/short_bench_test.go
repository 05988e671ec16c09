package weigher

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// shortLengths are the text lengths, in bytes, of BenchmarkCountShort: the
// new turn of a warm conversation, a tool's name or description, a system
// prompt's sentence.
var shortLengths = []int{8, 16, 32, 64, 128, 200}

// shortTexts are n texts of about size bytes each (cut at rune starts),
// drawn in turn from every text kind of BenchmarkCold, so that they do not
// repeat.
func shortTexts(size, n int) []string {
	r := rand.New(rand.NewPCG(uint64(size), 7))
	var src []string
	for _, k := range textKinds {
		src = append(src, k.gen(r, 64<<10))
	}
	out := make([]string, 0, n)
	for i := 0; len(out) < n; i++ {
		s := src[i%len(src)]
		a := r.IntN(len(s) - size - 8)
		for !utf8.RuneStart(s[a]) {
			a++
		}
		e := a + size
		for e < len(s) && !utf8.RuneStart(s[e]) {
			e++
		}
		out = append(out, s[a:e])
	}
	return out
}

// BenchmarkCountShort counts short texts (shortLengths, every text kind) in
// each of the weigher's encodings, as chat.go counts a message's content:
// the counter's fixed cost per call dominates them. For instructions per
// call, inside countText only:
//
//	go test -c -o /tmp/w.test ./weigher
//	GOGC=off GODEBUG=cpu.rdtscp=off GOMAXPROCS=1 valgrind --tool=callgrind \
//	  --collect-atstart=no --toggle-collect='*weigher.countText' \
//	  /tmp/w.test -test.run XXX -test.bench 'CountShort/o200k_base/^64B$' -test.benchtime 1200x
//
// less the same with 200x, over 1000.
func BenchmarkCountShort(b *testing.B) {
	w := testWeigher(b)
	for _, enc := range knownEncodings {
		c, ok := w.encoders[enc]
		if !ok {
			continue // a legacy encoding no configured model uses
		}
		for _, size := range shortLengths {
			b.Run(fmt.Sprintf("%s/%dB", enc, size), func(b *testing.B) {
				texts := shortTexts(size, 1024)
				b.ReportAllocs()
				var n int64
				i := 0
				for b.Loop() {
					n += countText(c, texts[i%len(texts)])
					i++
				}
				b.ReportMetric(float64(n)/float64(i), "tokens/op")
			})
		}
	}
}

// TestShortTextsMatchTiktoken: short texts of every kind and length, and
// the same with a byte that is not UTF-8 put in at each kind of place
// (alone, cutting a rune, inside an ASCII word, at either end), special-
// token text, and runs of one character up to the piece limit, count in
// o200k_base and cl100k_base what tiktoken-go counts. The counter
// validates only the pieces its general matcher finds, so the bad bytes
// check that a text that is not UTF-8 is always caught.
func TestShortTextsMatchTiktoken(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	w := testWeigher(t)
	var texts []string
	for _, size := range shortLengths {
		for i, s := range shortTexts(size, 40) {
			texts = append(texts, s)
			k := i % len(s)
			texts = append(texts, s[:k]+"\xff"+s[k:], s[:k]+"\xe4\xb8"+s[k:], "\x80"+s, s+"\xc3", s[:k]+"\xed\xa0\x80"+s[k:])
		}
	}
	texts = append(texts, "<|endoftext|>", "a<|endoftext|>b", "<|fim_prefix|>x<|fim_suffix|>", "<|im_start|>user\nhi<|im_end|>",
		"\xff", "\xff\xfe", "é\xff", "abc\x80def", "日本\xe6\x97語", "😀\xf0\x9f\x98", "\xf0\x9f\x98😀")
	for _, r := range []string{"a", " ", "\n", "!", "7", "é", "中", "😀", "\xff"} {
		for _, n := range []int{1, 2, 3, 15, 16, 17, 48, 49, 64} {
			if s := strings.Repeat(r, n); len(s) <= maxPieceBytes {
				texts = append(texts, s, "x"+s, s+"x")
			}
		}
	}
	for _, enc := range diffEncodings {
		fast, ref := w.encoders[enc], reference(t, enc)
		bad := 0
		for _, s := range texts {
			if got, want := countText(fast, s), ref.count(s); got != want {
				t.Errorf("%s: %q: %d tokens, tiktoken-go %d", enc, s, got, want)
				if bad++; bad > 10 {
					t.FailNow()
				}
			}
		}
	}
}

// FuzzShortText holds countText to tiktoken-go on short texts, in both
// fast encodings, and to the counter without its memo.
func FuzzShortText(f *testing.F) {
	for _, s := range shortTexts(32, 20) {
		f.Add(s)
	}
	f.Add("a\xffb")
	f.Add("<|endoftext|>")
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 48 { // tiktoken-go's regexp2 backtracks badly on some longer texts
			s = s[:48]
		}
		for _, enc := range diffEncodings {
			fast := w.encoders[enc].(*bpeCounter)
			plain := &bpeCounter{ranks: fast.ranks, o200k: fast.o200k, pairs: fast.pairs, pairBits: fast.pairBits, cross: fast.cross, noMemo: true}
			want := reference(t, enc).count(s)
			if got := countText(fast, s); got != want {
				t.Errorf("%s: %q: %d tokens, tiktoken-go %d", enc, s, got, want)
			}
			if got := plain.count(s); got != want {
				t.Errorf("%s: %q: %d tokens without the memo, tiktoken-go %d", enc, s, got, want)
			}
		}
	})
}

// TestPieceKeyShortTexts: the word loads of pieceKey (forward, and backward from a
// piece's end near the end of a text) give pack's key for every piece of
// 1 to 16 bytes at every place in texts of every length up to 40 bytes.
func TestPieceKeyShortTexts(t *testing.T) {
	const src = "0123456789abcdefghijklmnopqrstuvwxyz\x80\xff日本"
	for l := 1; l <= len(src); l++ {
		text := src[:l]
		for i := range l {
			for n := 1; n <= min(16, l-i); n++ {
				lo, hi := pieceKey(text, i, n)
				wantLo, wantHi := pack(text[i:i+min(n, 8)]), uint64(0)
				if n > 8 {
					wantHi = pack(text[i+8 : i+n])
				}
				if lo != wantLo || hi != wantHi {
					t.Fatalf("pieceKey(%q, %d, %d) = %#x, %#x; want %#x, %#x", text, i, n, lo, hi, wantLo, wantHi)
				}
			}
		}
	}
}
