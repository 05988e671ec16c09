package weigher

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// trimmedConversation is a chat conversation as the load benchmark's warm
// cells and chat frameworks send it: one more turn (an assistant answer
// and a user message) a request, and once it holds hi messages after the
// system prompt, its oldest turns dropped down to lo, so that the next body
// starts with other bytes (no resume point holds) and each message kept is
// looked up in the count cache. Its zero value is not usable; see
// newTrimmedConversation.
type trimmedConversation struct {
	id     int      // tells conversations apart
	system string   // the system message
	msgs   []string // the messages after it, oldest first
	turn   int      // turns added
	lo, hi int      // message counts: trimmed down to lo once past hi
}

func newTrimmedConversation(id, lo, hi int) *trimmedConversation {
	c := &trimmedConversation{id: id, lo: lo, hi: hi,
		system: fmt.Sprintf(`{"role":"system","content":"You are assistant %d of the count cache test: answer briefly and cite the docs."}`, id)}
	for len(c.msgs) < lo {
		c.addTurn()
	}
	return c
}

// addTurn appends an answer and the next user message, each of its own
// words (about 200 bytes).
func (c *trimmedConversation) addTurn() {
	c.turn++
	c.msgs = append(c.msgs,
		fmt.Sprintf(`{"role":"assistant","content":"Answer %d of conversation %d: the limiter refills %d tokens a second, and a stream the client drops is charged what it streamed so far."}`, c.turn, c.id, c.turn*7),
		fmt.Sprintf(`{"role":"user","content":"Question %d of conversation %d: what happens to budget %d when the calendar month turns over, and which header says so?"}`, c.turn, c.id, c.turn*13))
}

// next returns the next body: the conversation one turn longer, trimmed
// first when it is past hi messages.
func (c *trimmedConversation) next() []byte {
	if len(c.msgs) >= c.hi {
		c.msgs = c.msgs[:copy(c.msgs, c.msgs[len(c.msgs)-c.lo:])]
	}
	c.addTurn()
	return []byte(`{"model":"gpt-4o","messages":[` + c.system + "," + strings.Join(c.msgs, ",") + `]}`)
}

// hitShare weighs turns bodies of a new trimmed conversation through w and
// returns the share of the count cache's lookups over them that hit (from
// the cache's own counters), with the lookups and the bodies resumed.
func hitShare(t *testing.T, w *Weigher, id, turns int) (share float64, lookups, resumed uint64) {
	t.Helper()
	conv := newTrimmedConversation(id, 12, 24)
	w.Chat(conv.next()) // its first body is all new text, as a cold request's
	before := w.CacheStats()
	for range turns {
		w.Chat(conv.next())
	}
	after := w.CacheStats()
	hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
	return float64(hits) / float64(hits+misses), hits + misses, after.Resumed - before.Resumed
}

// TestFullCacheKeepsGrowingConversation: a count cache filled to capacity
// with one-off elements (cold traffic: bodies never sent again) keeps a
// growing conversation's messages as well as a fresh cache does. Most of
// its bodies resume after the previous one, so its messages are written
// once and looked up only when a trim moves the body's start (issue #13:
// otter's W-TinyLFU admitted a message seen once only against a victim its
// frequency sketch rated lower; with the window shrunk to nothing by the
// cold traffic's misses, it turned most of them away, and the requests after
// each trim counted the whole conversation again).
func TestFullCacheKeepsGrowingConversation(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	const bytes = 1 << 20
	const turns = 120
	fresh := cachedWeigher(t, bytes)
	freshShare, lookups, resumed := hitShare(t, fresh, 1, turns)
	if resumed < turns/2 || resumed == turns {
		t.Fatalf("test conversation: %d of %d bodies resumed, want most but not all (trims)", resumed, turns)
	}

	full := cachedWeigher(t, bytes)
	capacity := full.cache.size
	// Cold traffic: bodies of eight one-off messages each, twenty times
	// what the cache holds, with the lookups the cold cells make.
	for i := 0; i < 20*capacity; i += 8 {
		var b strings.Builder
		b.WriteString(`{"model":"gpt-4o","messages":[`)
		for j := range 8 {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"role":"user","content":"one-off message %d of the cold traffic, never sent again: %x"}`, i+j, (i+j)*2654435761)
		}
		b.WriteString(`]}`)
		full.Chat([]byte(b.String()))
	}
	if s := full.CacheStats(); s.Entries < int64(capacity)*9/10 {
		t.Fatalf("cold traffic left %d entries, want the cache full (%d)", s.Entries, capacity)
	}
	fullShare, _, _ := hitShare(t, full, 2, turns)
	t.Logf("hit share over %d lookups: fresh cache %.3f, full cache %.3f", lookups, freshShare, fullShare)
	if fullShare < freshShare-0.01 {
		t.Errorf("a cache full of one-off elements found %.1f%% of a growing conversation's counts, a fresh one %.1f%%", 100*fullShare, 100*freshShare)
	}
}
