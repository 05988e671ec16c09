package weigher

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// longPieces are pieces of 17 to textMemoBytes bytes, which
// pieceTokensIn remembers in the text memo: runs of spaces and dashes,
// long identifiers, a token of that length, CJK and Cyrillic phrases.
func longPieces(r *rand.Rand) []string {
	ps := []string{
		strings.Repeat(" ", 17), strings.Repeat(" ", 31), strings.Repeat("-", 40), strings.Repeat("=", 48),
		"_configurationManagerFactory", "AbstractSingletonProxyFactoryBean", strings.Repeat("ab", 12),
		"请求响应速率限制预算本", "запросответлимитбюджет", strings.Repeat("0", 20),
	}
	for len(ps) < 300 {
		s := randomText(r, 3+r.IntN(10))
		if len(s) > 16 && len(s) <= textMemoBytes {
			ps = append(ps, s)
		}
	}
	return ps
}

// TestLongPiecesRemembered: a piece of 17 to textMemoBytes bytes counted
// through a piece memo (pieceTokensIn, remembered in the text memo as a
// merge) counts what the counter without a memo counts, the first time
// and when found again (kept after each count); the same bytes counted in turn as a text
// (countText, whose pieces may differ) and as a segment of a long piece
// (segmentTokens, the same mark) keep their own counts.
func TestLongPiecesRemembered(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 5))
	ps := longPieces(r)
	for _, c := range shortTextCounters(t) {
		mc := c.takeMemo()
		mc.memo.texts = textMemo{}
		differ, found := 0, 0
		for round := range 3 {
			for i, p := range ps {
				want := c.pieceTokens(p)
				for k := range 2 { // kept, then found
					if got := c.pieceTokensIn(&mc.memo, p); got != want {
						t.Fatalf("o200k %v: round %d, piece %d %q, count %d: %d with the memo, %d without", c.o200k, round, i, p, k, got, want)
					}
					if mc.memo.texts.slot(p).holds(p, textMemoPiece) {
						found++
					}
				}
				if got := c.segmentTokens(&mc.memo, p, 0, len(p)); got != want {
					t.Fatalf("o200k %v: round %d, piece %d %q: segmentTokens %d, want %d", c.o200k, round, i, p, got, want)
				}
				text := c.count(p)
				if text != want {
					differ++
				}
				if got := countText(mc, p); got != text {
					t.Fatalf("o200k %v: round %d, piece %d %q: countText %d after its piece's count, counter %d", c.o200k, round, i, p, got, text)
				}
			}
		}
		c.putMemo(mc)
		if differ == 0 || found < 3*2*len(ps) {
			t.Fatalf("o200k %v: %d pieces count differently as texts, %d found again: the test shows nothing", c.o200k, differ, found)
		}
	}
}

// TestLongPiecesSlotTwins: two pieces of one length that share a text
// memo slot and count differently are each counted as themselves, in
// turns: a slot answers for its own bytes only.
func TestLongPiecesSlotTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 3))
	for _, c := range shortTextCounters(t) {
		bySlot := map[uint64]string{}
		var a, b string
		for a == "" {
			var sb strings.Builder
			for range 24 {
				sb.WriteByte("abcdefghijklmnopqrstuvwxyz"[r.IntN(26)])
			}
			s := sb.String()
			k := textSlot(s)
			if o, ok := bySlot[k]; ok && c.pieceTokens(o) != c.pieceTokens(s) {
				a, b = o, s
			}
			bySlot[k] = s
		}
		mc := c.takeMemo()
		for round := range 4 {
			for _, p := range []string{a, b} {
				if got, want := c.pieceTokensIn(&mc.memo, p), c.pieceTokens(p); got != want {
					t.Fatalf("o200k %v: round %d: %q counts %d with the memo, %d without", c.o200k, round, p, got, want)
				}
			}
		}
		c.putMemo(mc)
	}
}
