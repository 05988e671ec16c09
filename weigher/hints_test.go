package weigher

import (
	"testing"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// guessedElems weighs body's parse through w and returns how many of its
// messages (of hintPrefix bytes or more, the last, new one excepted) the
// scan stepped over by an end hint, how many such messages there are, and
// what was left of the request's budget for wrong guesses.
func guessedElems(t *testing.T, w *Weigher, body []byte) (guessed, long, budget int) {
	t.Helper()
	d, fallback, ok := w.parseRequest(body, chatFields)
	if !ok {
		t.Fatalf("not parsed: %+v", fallback)
	}
	defer d.close()
	for _, m := range d.lay.Members {
		if d.span(m.Key) != `"messages"` {
			continue
		}
		elems := d.lay.Elems[m.First:m.Last]
		for _, sp := range elems[:len(elems)-1] {
			if sp.End-sp.Start >= hintPrefix {
				long++
			}
		}
	}
	for _, el := range d.memo.pre {
		if el.found && !el.hint && el.n >= hintPrefix {
			guessed++
		}
	}
	return guessed, long, d.memo.guessBudget
}

// TestEndHintsStepOverRememberedMessages: a conversation resent with one
// more turn has every earlier message of hintPrefix bytes or more stepped
// over by its end hint (no Skip), and weighs as without the cache.
func TestEndHintsStepOverRememberedMessages(t *testing.T) {
	w, cold := cachedWeigher(t, 4<<20), uncached(t)
	bodies := growingBodies(t, "gpt-4o", 11, 24<<10)
	if len(bodies) < 3 {
		t.Fatalf("%d bodies", len(bodies))
	}
	for _, body := range bodies[:len(bodies)-1] {
		w.Chat(body)
	}
	last := bodies[len(bodies)-1]
	guessed, long, budget := guessedElems(t, w, last)
	if long < 2 || guessed != long {
		t.Errorf("%d of %d remembered messages stepped over by their hint", guessed, long)
	}
	if budget != len(last) {
		t.Errorf("wrong guesses used %d bytes of the budget, want none", len(last)-budget)
	}
	if got, want := w.Chat(last), cold.Chat(last); got != want {
		t.Errorf("warm %+v, cold %+v", got, want)
	}
}

// TestWrongEndHints: hints that all name a wrong length (the message and
// the next one: bytes that open with '{' and close with '}', so the scan
// offers them to Vouch) cost at most the body's length in hashing (the
// budget), and the body weighs as without the cache; the hints are then
// put right.
func TestWrongEndHints(t *testing.T) {
	w, cold := cachedWeigher(t, 4<<20), uncached(t)
	bodies := growingBodies(t, "gpt-4o", 12, 24<<10)
	for _, body := range bodies[:len(bodies)-1] {
		w.Chat(body)
	}
	last := bodies[len(bodies)-1]
	d, _, _ := w.parseRequest(last, chatFields)
	ctx := w.cache.fieldsContext(chatFields.names["messages"], 2, w.maxDepth)
	var spans []jsonscan.Span
	for _, m := range d.lay.Members {
		if d.span(m.Key) == `"messages"` {
			spans = append(spans, d.lay.Elems[m.First:m.Last]...)
		}
	}
	d.close()
	hints := w.cache.hints.Load()
	poisoned := 0
	for i := 0; i+1 < len(spans); i++ {
		if sp := spans[i]; sp.End-sp.Start >= hintPrefix {
			hints.put(w.cache.hintHash(ctx, string(last[sp.Start:sp.Start+hintPrefix])), int(spans[i+1].End-sp.Start))
			poisoned++
		}
	}
	if poisoned < 2 {
		t.Fatalf("%d hints poisoned", poisoned)
	}
	guessed, long, budget := guessedElems(t, w, last)
	if guessed != 0 || budget < 0 || budget == len(last) {
		t.Errorf("wrong hints: %d of %d messages stepped over, budget left %d of %d", guessed, long, budget, len(last))
	}
	if got, want := w.Chat(last), cold.Chat(last); got != want {
		t.Errorf("warm %+v, cold %+v", got, want)
	}
	if guessed, long, _ := guessedElems(t, w, last); guessed < long {
		t.Errorf("after the wrong hints were put right: %d of %d stepped over", guessed, long)
	}
}

// TestHintTableWithinCacheBytes: the hint table takes its share of the
// cache's bytes, and the entries the rest.
func TestHintTableWithinCacheBytes(t *testing.T) {
	for _, bytes := range []int64{0, 1, 192, 4 << 10, 1 << 20, 3<<20 + 5, DefaultCacheBytes} {
		c := newCountCache(bytes)
		want := bytes
		if want == 0 {
			want = DefaultCacheBytes
		}
		table := c.hints.Load().bytes()
		if table > want/hintShare || int64(c.c.GetMaximum())+table > max(want, cacheEntryBytes) {
			t.Errorf("CacheBytes %d: hint table %d bytes, entries %d", bytes, table, c.c.GetMaximum())
		}
		if want >= 1<<20 && table < want/hintShare/2 {
			t.Errorf("CacheBytes %d: hint table of only %d bytes", bytes, table)
		}
	}
}
