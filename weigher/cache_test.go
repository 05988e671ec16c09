package weigher

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"runtime"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// cachedWeigher is testWeigher with a count cache of its own, bytes big.
func cachedWeigher(tb testing.TB, bytes int64) *Weigher {
	tb.Helper()
	w := *testWeigher(tb)
	w.cache = newCountCache(bytes)
	return &w
}

// TestWarmConversationCountsOnlyTheNewTurn checks what the cache is for: a
// conversation resent with one more turn has only that turn counted (one
// miss per request, the rest hits), and its estimate is the cold one.
func TestWarmConversationCountsOnlyTheNewTurn(t *testing.T) {
	w, cold := cachedWeigher(t, 1<<20), uncached(t)
	bodies := growingBodies(t, "gpt-4o", 3, 64<<10)
	if len(bodies) < 10 {
		t.Fatalf("only %d turns", len(bodies))
	}
	for i, body := range bodies {
		before := w.CacheStats()
		got, want := w.Chat(body), cold.Chat(body)
		if got != want {
			t.Fatalf("turn %d: warm %+v, cold %+v", i, got, want)
		}
		after := w.CacheStats()
		// Only counts are tallied (the field check's lookups are not):
		// the new message is counted, every earlier one remembered.
		if misses := after.Misses - before.Misses; misses != 1 {
			t.Errorf("turn %d: %d messages counted, want only the new one", i, misses)
		}
		if hits := after.Hits - before.Hits; hits != uint64(i) {
			t.Errorf("turn %d: %d counts remembered, want %d", i, hits, i)
		}
	}
}

// TestCacheKeysAreContextual checks that one message's count is not
// reused across encodings or models whose rules differ.
func TestCacheKeysAreContextual(t *testing.T) {
	w, cold := cachedWeigher(t, 1<<20), uncached(t)
	msg := `{"role":"user","content":[{"type":"text","text":"The same message, weighed for different models and encodings."},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"high"}}]}`
	for _, model := range []string{"gpt-4o", "gpt-4", "gpt-4o-mini", "o4-mini", "gpt-4.1-mini", "gpt-4o"} {
		body := []byte(`{"model":"` + model + `","messages":[` + msg + `]}`)
		if got, want := w.Chat(body), cold.Chat(body); got != want {
			t.Errorf("%s: cached %+v, cold %+v", model, got, want)
		}
	}
}

// TestCacheIsBounded fills a small cache with many distinct messages: it
// holds no more entries than its bytes allow.
func TestCacheIsBounded(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	const limit = 64 << 10
	w := cachedWeigher(t, limit)
	for i := range 5000 {
		body := fmt.Appendf(nil, `{"model":"gpt-4o","messages":[{"role":"user","content":"distinct message number %d, long enough to be remembered"}]}`, i)
		w.Chat(body)
	}
	if s := w.CacheStats(); s.Bytes > limit || s.Entries == 0 {
		t.Fatalf("cache of %d bytes holds %d entries (%d bytes)", limit, s.Entries, s.Bytes)
	}
}

// TestCacheEntryBytes measures the heap one cached count takes, which
// cacheEntryBytes must not be below (the cache's bound counts entries at
// that weight): the count table is made whole for its size, so the heap a
// cache of n entries takes, divided by n, once it holds them.
func TestCacheEntryBytes(t *testing.T) {
	const n = 100_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := newCountCache(n * cacheEntryBytes * 2)
	for i := range n {
		c.set(cacheKey{ctx: uint64(i), n: i}, entry{t: tally{text: int64(i)}, ctx: uint64(i), counted: true})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := c.c.Load().Len(); got < n*9/10 {
		t.Fatalf("cache holds %d of %d entries", got, n)
	}
	// The hint and resume tables and the prefix hasher are made with it.
	tables := c.hints.Load().bytes() + c.resume.Load().bytes()
	per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)-tables) / float64(c.size)
	t.Logf("%.0f bytes of heap per cached count (cacheEntryBytes %d)", per, cacheEntryBytes)
	if per > cacheEntryBytes {
		t.Errorf("a cached count takes %.0f bytes, above cacheEntryBytes (%d)", per, cacheEntryBytes)
	}
	runtime.KeepAlive(c)
}

// TestBoundCountsAreNotRemembered weighs a conversation past its exact
// budget (its later messages bounded), then the same conversation with no
// budget through the same cache: the second estimate is the exact one, not
// the bounds the first left behind.
func TestBoundCountsAreNotRemembered(t *testing.T) {
	w, cold := cachedWeigher(t, 4<<20), uncached(t)
	bounded := *w
	bounded.exactMax = 4 << 10
	bodies := growingBodies(t, "gpt-4o", 5, 48<<10)
	body := bodies[len(bodies)-1]
	if e := bounded.Weigh(KindChat, body); !e.Bounded {
		t.Fatalf("a %d-byte body over a 4 KiB budget is not bounded: %+v", len(body), e)
	}
	if got, want := w.Chat(body), cold.Chat(body); got != want {
		t.Fatalf("after a bounded weighing, the cache gives %+v; exact is %+v", got, want)
	}
}

// TestResponsesTextIsNotAnItem: the same JSON string as instructions or
// input text, and as an element of an input array, is weighed in each place
// by its own rule (a shared cache context let the array's count stand for
// the text's), and a bare string item weighs as the user message a lenient
// upstream reads it as.
func TestResponsesTextIsNotAnItem(t *testing.T) {
	text := strings.Repeat("hello world, a prompt long enough to be remembered. ", 200)
	q, _ := json.Marshal(text)
	w, cold := cachedWeigher(t, 1<<20), uncached(t)
	for _, body := range []string{
		`{"model":"gpt-4o","input":[` + string(q) + `]}`,
		`{"model":"gpt-4o","input":` + string(q) + `}`,
		`{"model":"gpt-4o","instructions":[` + string(q) + `],"input":` + string(q) + `}`,
		`{"model":"gpt-4o","instructions":` + string(q) + `,"input":[` + string(q) + `]}`,
	} {
		got, want := w.Responses([]byte(body)), cold.Responses([]byte(body))
		if got != want {
			t.Errorf("%.60s…: cached %+v, cold %+v", body, got, want)
		}
		if min := int64(len(text) / 6); want.InputTokens < min {
			t.Errorf("%.60s…: %d input tokens for %d bytes of text", body, want.InputTokens, len(text))
		}
	}
}

// TestPDFPagesOfTinyData: probing a tiny inline document allocates about
// its size, not a 32 KiB buffer (a body of many tiny documents held a
// weighing slot for seconds).
func TestPDFPagesOfTinyData(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const calls = 1000
	for range calls {
		pdfPages("QUFB")
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / calls; per > 512 {
		t.Fatalf("pdfPages of 4 bytes allocates %d bytes a call", per)
	}
}

// TestCacheTurnedOffByReload: a New with caching off (a reload to
// count_cache_bytes: -1) lets the shared cache go: its statistics read zero
// and the next New with caching on starts an empty one.
func TestCacheTurnedOffByReload(t *testing.T) {
	on, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	on.Chat([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"a message long enough to be remembered by the cache"}]}`))
	if SharedCacheStats().Entries == 0 {
		t.Fatal("nothing remembered")
	}
	if _, err := New(Options{CacheBytes: -1}); err != nil {
		t.Fatal(err)
	}
	if s := SharedCacheStats(); s != (CacheStats{}) {
		t.Fatalf("after a New with caching off the shared cache reads %+v", s)
	}
	again, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := again.CacheStats(); s.Entries != 0 {
		t.Fatalf("the cache turned on again holds %d entries", s.Entries)
	}
}

// TestCacheSlotSharedByTwoKeys: two keys the cache holds in one slot (their
// hashes differ only in the half the slot does not take) never read each
// other's count: a lookup of the other key is a miss, and a write replaces.
func TestCacheSlotSharedByTwoKeys(t *testing.T) {
	c := newCountCache(1 << 20)
	k1 := c.key(7, strings.Repeat("a message long enough to be cached, ", 3))
	k2 := k1
	k2.h.Hi ^= 1
	if k1.slot() != k2.slot() || k1 == k2 {
		t.Fatalf("test keys: slots %x %x, equal %v", k1.slot(), k2.slot(), k1 == k2)
	}
	// k3: another context, its hash's low half made to land in k1's slot.
	k3 := k1
	k3.ctx++
	k3.h.Lo = k1.slot() ^ bits.RotateLeft64(k3.ctx, 29) ^ uint64(k3.n)*0x9e3779b97f4a7c15
	if k3.slot() != k1.slot() {
		t.Fatalf("test keys: k3's slot %x, k1's %x", k3.slot(), k1.slot())
	}
	step := func(name string, k cacheKey, want int64, found bool) {
		t.Helper()
		e, ok := c.get(k)
		if ok != found || ok && e.t.text != want {
			t.Errorf("%s: get = %+v, %v; want text %d, %v", name, e.t, ok, want, found)
		}
	}
	c.set(k1, entry{t: tally{text: 11}, counted: true})
	step("step 1 (k1 written, k1 read)", k1, 11, true)
	step("step 2 (k1 written, k2 read)", k2, 0, false)
	step("step 2b (k1 written, k3 of another context read)", k3, 0, false)
	c.set(k2, entry{t: tally{text: 22}, counted: true})
	step("step 3 (k2 replaced k1, k1 read)", k1, 0, false)
	step("step 4 (k2 read)", k2, 22, true)
}

// TestSystemPromptCacheKeysAreContextual is TestCacheKeysAreContextual for
// an Anthropic system prompt, which is remembered by the count cache
// directly (not through a scan's memo): one system prompt weighed for
// models of different encodings and families is never counted under
// another's.
func TestSystemPromptCacheKeysAreContextual(t *testing.T) {
	w, cold := cachedWeigher(t, 1<<20), uncached(t)
	system := `[{"type":"text","text":"Vous êtes un assistant précis. 日本語で答えてください。 Réponds en français, ` +
		`avec des exemples de code: func main() { fmt.Println(\"héllo\") } 😀👍🏽"}]`
	seen := map[int64]bool{}
	for _, model := range []string{"gpt-4o", "gpt-4", "claude-sonnet-4-5", "claude-3-5-haiku", "gpt-4o"} {
		body := []byte(`{"model":"` + model + `","max_tokens":64,"system":` + system +
			`,"messages":[{"role":"user","content":"hi"}]}`)
		got, want := w.Messages(body), cold.Messages(body)
		if got != want {
			t.Errorf("%s: cached %d input tokens, cold %d", model, got.InputTokens, want.InputTokens)
		}
		seen[want.InputTokens] = true
	}
	if len(seen) < 2 {
		t.Fatalf("every model weighed the prompt alike (%v): the test cannot tell contexts apart", seen)
	}
}
