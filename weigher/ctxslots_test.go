package weigher

import "testing"

// TestContextMemoSameAsMade: a memo's contexts, asked for in turns for
// every fields value, depth and kind, under two caches (seeds) and two
// nesting limits (one memo reused across them, as the pool reuses it),
// are those the cache makes afresh.
func TestContextMemoSameAsMade(t *testing.T) {
	caches := []*countCache{newCountCache(1 << 20), newCountCache(1 << 20)}
	if caches[0].seed == caches[1].seed {
		t.Fatal("two caches with one seed")
	}
	m := new(elemMemo)
	asked := 0
	for round := range 3 {
		for _, c := range caches {
			for _, maxDepth := range []int{DefaultMaxDepth, 7} {
				m.cache, m.maxDepth = c, maxDepth
				for _, f := range allFields() {
					for depth := range 4 {
						if got, want := m.fieldsContext(f, depth), c.fieldsContext(f, depth, maxDepth); got != want {
							t.Fatalf("round %d: fields %d depth %d: %x, made %x", round, f.id, depth, got, want)
						}
						if got, want := m.listContext(f, depth), c.listContext(f, depth, maxDepth); got != want {
							t.Fatalf("round %d: list %d depth %d: %x, made %x", round, f.id, depth, got, want)
						}
						asked += 2
					}
					if got, want := m.context(ctxResume, f, 0), c.resumeContext(f, maxDepth); got != want {
						t.Fatalf("round %d: resume %d: %x, made %x", round, f.id, got, want)
					}
					// The same again at once: from the slot.
					if got, want := m.fieldsContext(f, 2), c.fieldsContext(f, 2, maxDepth); got != want {
						t.Fatalf("round %d: fields %d again: %x, made %x", round, f.id, got, want)
					}
				}
			}
		}
	}
	if asked == 0 {
		t.Fatal("nothing asked")
	}
	// A slot filled under one cache (nesting limit) and asked for at once
	// under another: the other's context.
	for _, f := range allFields() {
		for _, step := range []struct {
			c        *countCache
			maxDepth int
		}{{caches[0], DefaultMaxDepth}, {caches[1], DefaultMaxDepth}, {caches[1], 7}, {caches[0], 7}, {caches[0], DefaultMaxDepth}} {
			m.cache, m.maxDepth = step.c, step.maxDepth
			if got, want := m.fieldsContext(f, 2), step.c.fieldsContext(f, 2, step.maxDepth); got != want {
				t.Fatalf("fields %d, limit %d: %x, made %x", f.id, step.maxDepth, got, want)
			}
		}
		for _, step := range []struct {
			c        *countCache
			maxDepth int
		}{{caches[0], DefaultMaxDepth}, {caches[1], DefaultMaxDepth}, {caches[1], 7}, {caches[0], 7}} {
			m.cache, m.maxDepth = step.c, step.maxDepth
			if got, want := m.context(ctxResume, f, 0), step.c.resumeContext(f, step.maxDepth); got != want {
				t.Fatalf("resume %d, limit %d: %x, made %x", f.id, step.maxDepth, got, want)
			}
		}
	}
}
