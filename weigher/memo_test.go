package weigher

import (
	"math/rand/v2"
	"testing"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// TestPieceKey: pieceKey's word loads give pack's key at every offset and
// length, near the text's end too, and the rank table's lookup, given that
// key and its hash, agrees with get.
func TestPieceKey(t *testing.T) {
	w := testWeigher(t)
	ranks := w.encoders[EncodingO200k].(*bpeCounter).ranks
	text := kindText("code", 2<<10) + " implementation" + randomText(rand.New(rand.NewPCG(5, 6)), 40)
	found := 0
	for i := range len(text) {
		for n := 1; n <= 16 && i+n <= len(text); n++ {
			p := text[i : i+n]
			lo, hi := pieceKey(text, i, n)
			wantLo, wantHi := pack(p), uint64(0)
			if n > 8 {
				wantLo, wantHi = pack(p[:8]), pack(p[8:])
			}
			if lo != wantLo || hi != wantHi {
				t.Fatalf("pieceKey(text, %d, %d) = %x, %x; pack says %x, %x (%q)", i, n, lo, hi, wantLo, wantHi, p)
			}
			h := hashKey(lo, n)
			if n > 8 {
				h = midHash(lo, hi, n)
			}
			want, ok := ranks.get(p)
			if got, gotOK := ranks.lookup(lo, hi, n, h); got != want || gotOK != ok {
				t.Fatalf("lookup(%q) = %d, %v; get says %d, %v", p, got, gotOK, want, ok)
			}
			if ok {
				found++
			}
		}
	}
	if found < 1000 {
		t.Fatalf("only %d of the substrings are tokens: the test shows little", found)
	}
}

// TestRankTableFindsEveryToken: get finds every token of both vocabularies,
// of every length, at its rank (lookup and the filter must not turn one
// away).
func TestRankTableFindsEveryToken(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(enc + ".tiktoken")
		if err != nil {
			t.Fatal(err)
		}
		table, long := newRankTable(ranks), 0
		for tok, want := range ranks {
			if got, ok := table.get(tok); !ok || got != want {
				t.Fatalf("%s: get(%q) = %d, %v; want %d", enc, tok, got, ok, want)
			}
			if len(tok) > 16 {
				long++
			}
		}
		if long == 0 {
			t.Fatalf("%s: no token over 16 bytes", enc)
		}
	}
}
