package weigher

import (
	"testing"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// A request's layout and piece memo are its elemMemo's (layoutOf,
// piecesOf), kept with it between requests, never also in their pools:
// a layout or piece memo in both would be handed to two requests at once.

// TestCloseKeepsMemoLayout: closing a doc whose layout is its memo's
// leaves the layout out of layouts (the memo keeps it). Fails when close
// returns the memo before the layout (dropLayout then takes it for a
// pooled one).
func TestCloseKeepsMemoLayout(t *testing.T) {
	w := cachedWeigher(t, DefaultCacheBytes)
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	m := w.cache.memo(body, chatFields, w.maxDepth)
	lay := layoutOf(m)
	if lay != &m.lay {
		t.Fatal("layoutOf(memo) is not the memo's layout")
	}
	d := doc{body: body, lay: lay, memo: m}
	d.close()
	if d.lay != nil || d.memo != nil {
		t.Fatal("close left the doc its layout or memo")
	}
	// Without the race detector a Put is found by the next Get on the
	// same goroutine (the pool's private slot); with it a Put may be
	// dropped, which only lets this pass.
	for range 4 {
		if got := layouts.Get().(*jsonscan.Layout); got == lay {
			t.Fatal("the memo's layout was put in layouts")
		}
	}
}

// TestMemoKeepsPieceMemo: piecesOf gives a memo's request the memo's
// piece memo when it is the counter's, another counter's request a piece
// memo of its own counter, which the memo keeps from then on, and no
// memo a pooled one; a chat weighing with the count cache on leaves its
// piece memo with its elemMemo, not in the counter's pool.
func TestMemoKeepsPieceMemo(t *testing.T) {
	w := cachedWeigher(t, DefaultCacheBytes)
	o200k := w.encoders[EncodingO200k].(*bpeCounter)
	cl100k := w.encoders[EncodingCL100k].(*bpeCounter)
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hello there"}]}`
	m := w.cache.memo(body, chatFields, w.maxDepth)
	a := m.piecesOf(o200k)
	if a == nil || a.bpe != o200k || m.piecesOf(o200k) != a {
		t.Fatal("piecesOf did not keep one piece memo of the counter")
	}
	b := m.piecesOf(cl100k)
	if b == a || b.bpe != cl100k || m.pieces != b {
		t.Fatal("piecesOf of another counter did not take and keep its own")
	}
	if p := (*elemMemo)(nil).piecesOf(o200k); p == nil || p.bpe != o200k {
		t.Fatal("piecesOf without a memo did not take one from the pool")
	}
	m.done()

	for range 4 {
		if e := w.Chat([]byte(body)); !e.Parsed {
			t.Fatal(e.FaultDetail)
		}
		got := memos.Get().(*elemMemo) // the chat's memo, unless the race detector dropped it
		if got.pieces == nil {
			continue
		}
		if mc, _ := o200k.memos.Get().(*memoCounter); mc != nil && mc == got.pieces {
			t.Fatal("the chat's piece memo is both its elemMemo's and in the counter's pool")
		}
		memos.Put(got)
	}
}
