package weigher

import (
	"math/rand/v2"
	"strings"
	"testing"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// cutWords are word lists of scripts written without spaces (and one
// with), whose words joined make the long pieces cutMerge cuts: the load
// benchmark's foreign text.
var cutWords = [][]string{
	strings.Fields(`请求 响应 速率 限制 预算 本月 账单 错误 为什么 如何 我们 需要 修复 这个 服务 上线 之前 延迟 吞吐量`),
	strings.Fields(`リクエスト レスポンス 制限 予算 今月 請求書 エラー なぜ どのように このサービスを 修正する 必要があります 遅延 スループット`),
	strings.Fields(`запрос ответ лимит бюджет месяц счёт ошибка почему как нужно исправить этот сервис до запуска`),
	strings.Fields(`요청 응답 속도 제한 예산 이번달 청구서 오류 왜 어떻게 우리는 수정해야 합니다`),
}

// cutPieces are long pieces for TestCutMergeSameAsScan: the words of
// cutWords joined, random bytes of small alphabets (where a cut's three
// checks each decide), random bytes, CJK runs with ASCII bytes among them.
func cutPieces(r *rand.Rand, n int) []string {
	alphabets := []string{"ab", "abcdefghijklmnopqrstuvwxyz", "速率限制器在每个日历周期", "😀👍🏽🚀🔥", "\x00\xff\x80 a", "é中a\n", "ой!ЙЁ"}
	var out []string
	for i := range n {
		var b strings.Builder
		size := 2 + r.IntN(300)
		switch i % 4 {
		case 0, 1:
			ws := cutWords[r.IntN(len(cutWords))]
			for b.Len() < size {
				b.WriteString(ws[r.IntN(len(ws))])
			}
		case 2:
			alpha := alphabets[r.IntN(len(alphabets))]
			for b.Len() < size {
				b.WriteByte(alpha[r.IntN(len(alpha))])
			}
		default:
			for b.Len() < size {
				b.WriteByte(byte(r.Uint32()))
			}
		}
		out = append(out, b.String())
	}
	return out
}

// TestCutMergeSameAsScan: cutting a piece where no token can span
// (cutMerge) counts what tiktoken's merge of the whole piece counts
// (scanMerge, the oracle), for both vocabularies, with the piece memo
// (its segments remembered from one piece to the next) and without, and
// the pieces of Chinese and Japanese text are cut (the test holds the cut
// path to the oracle, not only the heap).
func TestCutMergeSameAsScan(t *testing.T) {
	w := testWeigher(t)
	r := rand.New(rand.NewPCG(11, 12))
	pieces := cutPieces(r, 2000)
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		c := w.encoders[enc].(*bpeCounter)
		mc := c.takeMemo()
		defer c.putMemo(mc)
		cut := 0
		for _, p := range pieces {
			if c.nextCut(p, 0) >= 0 {
				cut++
			}
			want := scanMerge(c, p)
			if got := c.cutMerge(nil, p); got != want {
				t.Fatalf("%s: cutMerge(%q) = %d, the merge of the whole piece says %d", enc, p, got, want)
			}
			if got := c.cutMerge(&mc.memo, p); got != want {
				t.Fatalf("%s: cutMerge(%q) with the memo = %d, the merge of the whole piece says %d", enc, p, got, want)
			}
		}
		if cut < len(pieces)/4 {
			t.Errorf("%s: %d of %d pieces cut, want at least a quarter", enc, cut, len(pieces))
		}
		zh := strings.Join(cutWords[0], "")
		if c.nextCut(zh, 0) < 0 {
			t.Errorf("%s: no cut in %q", enc, zh)
		}
	}
}

// TestCutPiecesMatchTiktoken: pieces cut by cutMerge, counted through the
// counter, agree with tiktoken-go itself.
func TestCutPiecesMatchTiktoken(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	w := testWeigher(t)
	r := rand.New(rand.NewPCG(13, 14))
	var texts []string
	for range 60 {
		ws := cutWords[r.IntN(len(cutWords))]
		var b strings.Builder
		for b.Len() < 40+r.IntN(400) {
			b.WriteString(ws[r.IntN(len(ws))])
		}
		texts = append(texts, b.String())
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

// FuzzCutMerge holds cutMerge, with and without a memo kept across
// inputs, to the merge of the whole piece.
func FuzzCutMerge(f *testing.F) {
	for _, s := range cutPieces(rand.New(rand.NewPCG(15, 16)), 24) {
		f.Add(s)
	}
	w := testWeigher(f)
	memos := map[string]*memoCounter{}
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		memos[enc] = w.encoders[enc].(*bpeCounter).takeMemo()
	}
	f.Fuzz(func(t *testing.T, p string) {
		if len(p) < 2 || len(p) > 1000 {
			return
		}
		for _, enc := range []string{EncodingO200k, EncodingCL100k} {
			c := w.encoders[enc].(*bpeCounter)
			want := scanMerge(c, p)
			if got := c.cutMerge(nil, p); got != want {
				t.Fatalf("%s: cutMerge(%q) = %d, the merge of the whole piece says %d", enc, p, got, want)
			}
			if got := c.cutMerge(&memos[enc].memo, p); got != want {
				t.Fatalf("%s: cutMerge(%q) with the memo = %d, the merge of the whole piece says %d", enc, p, got, want)
			}
		}
	})
}

// TestEveryTokenMergesWhole: every token of each fast counter's
// vocabulary of 2 to maxPieceBytes bytes is what the byte-pair merge of
// its bytes makes (one token), so that the count of any string of those
// lengths with tiktoken's whole-token shortcut (pieceTokens, and the piece
// memo holding its counts) is its merge's: what cutMerge's memo of
// segments relies on.
func TestEveryTokenMergesWhole(t *testing.T) {
	w := testWeigher(t)
	for enc := range fastCounters {
		c := w.encoders[enc].(*bpeCounter)
		ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(enc + ".tiktoken")
		if err != nil {
			t.Fatal(err)
		}
		for tok := range ranks {
			if len(tok) < 2 || len(tok) > maxPieceBytes {
				continue
			}
			if n := scanMerge(c, tok); n != 1 {
				t.Errorf("%s: the merge of the token %q makes %d tokens", enc, tok, n)
			}
		}
	}
}

// TestCutAtEveryWindow: pieces built so that a token starts one byte
// before a place the other checks of a cut pass (its first two and three
// bytes no token, the bytes before it ones no token holds): only the
// four-byte window from x−1 keeps cutMerge from cutting inside the token
// (as the windows from x−3 and x−2 do for tokens placed one and two bytes
// earlier).
func TestCutAtEveryWindow(t *testing.T) {
	w := testWeigher(t)
	for enc := range fastCounters {
		c := w.encoders[enc].(*bpeCounter)
		ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(enc + ".tiktoken")
		if err != nil {
			t.Fatal(err)
		}
		tried := 0
		for tok := range ranks {
			if len(tok) < 4 || len(tok) > 12 || c.pairs[int(tok[0])<<8|int(tok[1])] >= 0 {
				continue
			}
			if _, ok := ranks[tok[:3]]; ok {
				continue
			}
			for _, lead := range []string{"\x00\x01\x02", "\x7f\x00\x7f", "\xff\xfe\xfd"} {
				p := strings.Repeat(lead+tok, 60/(len(lead)+len(tok))+2)
				if got, want := c.cutMerge(nil, p), scanMerge(c, p); got != want {
					t.Fatalf("%s: cutMerge(%q) = %d, the merge of the whole piece says %d", enc, p, got, want)
				}
			}
			if tried++; tried == 400 {
				break
			}
		}
		if tried == 0 {
			t.Errorf("%s: no token to place", enc)
		}
	}
}
