package weigher

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/jsonscan"

	"github.com/llmguard/llmguard/internal/nativetest"
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

// lostHints returns how many of body's messages of hintPrefix bytes or
// more (the last, new one excepted) find their end hint's slot in w's
// table held by another element's hint: the table is direct-mapped under
// the cache's random seed, so a few of 16,384 slots are shared by two of
// a test's ~30 hints about once in a hundred runs, and the later writer
// wins. Such a message is a Skip, not a wrong count. A slot that is empty
// is no such loss: its hint was never written, and the test fails.
func lostHints(t *testing.T, w *Weigher, cold *Weigher, body []byte) (lost int) {
	t.Helper()
	d, fallback, ok := cold.parseRequest(body, chatFields) // no cache: reads and writes no hint
	if !ok {
		t.Fatalf("not parsed: %+v", fallback)
	}
	defer d.close()
	ctx := w.cache.fieldsContext(chatFields.names["messages"], 2, w.maxDepth)
	hints := w.cache.hints.Load()
	for _, m := range d.lay.Members {
		if d.span(m.Key) != `"messages"` {
			continue
		}
		elems := d.lay.Elems[m.First:m.Last]
		for _, sp := range elems[:len(elems)-1] {
			if sp.End-sp.Start < hintPrefix {
				continue
			}
			h := w.cache.hintHash(ctx, string(body[sp.Start:sp.Start+hintPrefix]))
			switch word := hints.slots[h&hints.mask].Load(); {
			case word == 0:
				t.Errorf("message at %d: no end hint written", sp.Start)
			case uint32(word>>32) != uint32(h>>32):
				lost++
			}
		}
	}
	return lost
}

// TestEndHintsStepOverRememberedMessages: a conversation resent with one
// more turn has every earlier message of hintPrefix bytes or more stepped
// over by its end hint (no Skip), but for one whose slot another hint
// took (lostHints: at most one in a run), and weighs as without the
// cache.
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
	lost := lostHints(t, w, cold, last)
	guessed, long, budget := guessedElems(t, w, last)
	if long < 2 || lost > 1 || guessed != long-lost {
		t.Errorf("%d of %d remembered messages stepped over by their hint, %d hints lost to another in their slot", guessed, long, lost)
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
// put right (but for one another hint took, lostHints).
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
	lost := lostHints(t, w, cold, last)
	if guessed, long, _ := guessedElems(t, w, last); lost > 1 || guessed < long-lost {
		t.Errorf("after the wrong hints were put right: %d of %d stepped over, %d hints lost to another in their slot", guessed, long, lost)
	}
}

// TestHintTableWithinCacheBytes: the hint table takes its share of the
// cache's bytes, and the entries the rest.
func TestHintTableWithinCacheBytes(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	for _, bytes := range []int64{0, 1, 192, 4 << 10, 1 << 20, 3<<20 + 5, DefaultCacheBytes} {
		c := newCountCache(bytes)
		want := bytes
		if want == 0 {
			want = DefaultCacheBytes
		}
		table := c.hints.Load().bytes()
		if table > want/hintShare || int64(c.size)*cacheEntryBytes+table > max(want, cacheEntryBytes) {
			t.Errorf("CacheBytes %d: hint table %d bytes, entries %d", bytes, table, c.size)
		}
		if want >= 1<<20 && table < want/hintShare/2 {
			t.Errorf("CacheBytes %d: hint table of only %d bytes", bytes, table)
		}
	}
}

// TestEndHintsStepOverShortMessages: messages shorter than hintPrefix (but
// long enough to be remembered) are stepped over by their hint too, keyed
// by their bytes and those after them: resent with one more turn, every
// earlier message but the last (whose following bytes changed) is guessed,
// no guess is wrong, and the estimate is the cold one.
func TestEndHintsStepOverShortMessages(t *testing.T) {
	w, cold := cachedWeigher(t, 4<<20), uncached(t)
	msg := func(i int) string {
		return fmt.Sprintf(`{"role":"user","content":"short message number %03d, remembered by the cache"}`, i)
	}
	body := func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"model":"gpt-4o","messages":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(msg(i))
		}
		b.WriteString(`],"max_tokens":100,"temperature":0.2,"stream":false,"user":"a user id to pad the body's end"}`)
		return []byte(b.String())
	}
	if n := len(msg(0)); n < minCachedBytes || n >= hintPrefix {
		t.Fatalf("test message of %d bytes: want [%d, %d)", n, minCachedBytes, hintPrefix)
	}
	const n = 12
	for i := 1; i < n; i++ {
		w.chatFrom(body(i), nil, resumeOff) // every element scanned: no resume point
	}
	d, fallback, ok := w.parseRequest(body(n), chatFields)
	if !ok {
		t.Fatalf("not parsed: %+v", fallback)
	}
	guessed := 0
	for _, el := range d.memo.pre {
		if el.found && !el.hint {
			guessed++
		}
	}
	budget := d.memo.guessBudget
	d.close()
	if guessed != n-2 {
		t.Errorf("%d of %d remembered short messages stepped over by their hint, want %d", guessed, n-1, n-2)
	}
	if budget != len(body(n)) {
		t.Errorf("wrong guesses used %d bytes of the budget, want none", len(body(n))-budget)
	}
	if got, want := w.Chat(body(n)), cold.Chat(body(n)); got != want {
		t.Errorf("warm %+v, cold %+v", got, want)
	}
}

// TestEndHintsStepOverToolLists: a tool list remembered whole is stepped
// over by its end hint when it comes again (laid out without its
// elements), and the estimate is the cold one.
func TestEndHintsStepOverToolLists(t *testing.T) {
	w, cold := cachedWeigher(t, 4<<20), uncached(t)
	body := agentBodyOf(21, 4, 1)
	w.chatFrom(body, nil, resumeOff)
	d, fallback, ok := w.parseRequest(body, chatFields)
	if !ok {
		t.Fatalf("not parsed: %+v", fallback)
	}
	unlaid := ""
	for _, m := range d.lay.Members {
		if m.Unlaid {
			unlaid += d.span(m.Key)
		}
	}
	d.close()
	if unlaid != `"tools"` {
		t.Errorf("lists stepped over: %s, want the tools", unlaid)
	}
	if got, want := w.Chat(body), cold.Chat(body); got != want {
		t.Errorf("warm %+v, cold %+v", got, want)
	}
}
